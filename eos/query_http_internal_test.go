package eos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A query's statuses keep their words; any other error answers 500 with
// generic text, as its detail may name paths or brokers.
func TestKeyErrorHidesDetail(t *testing.T) {
	secret := errors.New("pebble: open /var/lib/eos/app/counts/000042.sst: i/o error")
	for _, tc := range []struct {
		err    error
		code   int
		status string
	}{
		{fmt.Errorf("%w %q", ErrUnknownStore, "x"), http.StatusNotFound, "unknown_store"},
		{&QueryError{Store: "s", Topic: "in", Partition: 1, Err: ErrRestoring}, http.StatusServiceUnavailable, "restoring"},
		{&QueryError{Store: "s", Topic: "in", Partition: 1, Err: ErrStopped}, http.StatusServiceUnavailable, "stopped"},
		{&QueryError{Store: "s", Topic: "in", Partition: 1, Err: ErrNotOwner}, http.StatusMisdirectedRequest, "not_owner"},
		{fmt.Errorf("reading: %w", secret), http.StatusInternalServerError, "error"},
		{&unavailableError{fmt.Errorf("listing topics: %w", secret)}, http.StatusServiceUnavailable, "unavailable"},
	} {
		code, status, text := keyError(tc.err)
		if code != tc.code || status != tc.status {
			t.Errorf("%v: %d %s, want %d %s", tc.err, code, status, tc.code, tc.status)
		}
		if code == http.StatusInternalServerError && (strings.Contains(text, "pebble") || strings.Contains(text, "/var/lib")) {
			t.Errorf("500 text %q shows the error's detail", text)
		}
		if code == http.StatusServiceUnavailable && status == "unavailable" && strings.Contains(text, "pebble") {
			t.Errorf("503 text %q shows the error's detail", text)
		}
		if code != http.StatusInternalServerError && status != "unavailable" && text != tc.err.Error() {
			t.Errorf("%v: text %q, want the error's", tc.err, text)
		}
	}
}

// stoppedRunner is a Runner with a counting topology that never ran.
func stoppedRunner(t *testing.T, opts ...Option) *Runner {
	t.Helper()
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = []string{"127.0.0.1:1"}, "app", "a"
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes(), topology.Named("in"))
	counts := topology.Count(topology.GroupByKey(src, "by-key"), "counts", state.Memory())
	topology.ToTable(counts, "out", codec.JSON[int64](), topology.Named("out"))
	r, err := New(cfg, top, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The keys "." and ".." reach the store escaped as %2E and %2E%2E, and
// a redirect escapes them so; any other request under /stores/ is
// answered in JSON naming the route there is: 405 for a key's path with
// another method, 404 for any other path (a dot key unescaped included,
// which the mux cleans away).
func TestQueryHandlerRoutes(t *testing.T) {
	r := stoppedRunner(t, QueryPeers(func(string) (string, bool) { return "http://b:1", true }))
	srv := httptest.NewServer(r.QueryHandler())
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		code         int
		status, key  string
	}{
		{http.MethodGet, "/stores/counts/keys/%2E", http.StatusServiceUnavailable, "stopped", "."},
		{http.MethodGet, "/stores/counts/keys/%2E%2E", http.StatusServiceUnavailable, "stopped", ".."},
		{http.MethodGet, "/stores/counts/keys/.", http.StatusNotFound, "not_found", ""},
		{http.MethodGet, "/stores/counts/keys/..", http.StatusNotFound, "not_found", ""},
		{http.MethodGet, "/stores/counts", http.StatusNotFound, "not_found", ""},
		{http.MethodGet, "/stores/counts/values/k1", http.StatusNotFound, "not_found", ""},
		{http.MethodPost, "/stores/counts/keys/k1", http.StatusMethodNotAllowed, "method_not_allowed", ""},
		{http.MethodDelete, "/stores/counts/keys/k1", http.StatusMethodNotAllowed, "method_not_allowed", ""},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Status, Error string
			KeyBase64     []byte `json:"key_base64"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		switch {
		case err != nil:
			t.Errorf("%s %s: %d, body not JSON: %v", tc.method, tc.path, resp.StatusCode, err)
		case resp.StatusCode != tc.code || body.Status != tc.status || string(body.KeyBase64) != tc.key:
			t.Errorf("%s %s: %d %+v, want %d %s with key %q", tc.method, tc.path, resp.StatusCode, body, tc.code, tc.status, tc.key)
		case tc.key == "" && !strings.Contains(body.Error, "GET /stores/{store}/keys/{key}"):
			t.Errorf("%s %s: error %q does not name the route", tc.method, tc.path, body.Error)
		case tc.code == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD":
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, resp.Header.Get("Allow"))
		}
	}
	for key, want := range map[string]string{".": "/keys/%2E?hop=1", "..": "/keys/%2E%2E?hop=1", "a b": "/keys/a%20b?hop=1"} {
		req := httptest.NewRequest(http.MethodGet, "/stores/counts/keys/x", nil)
		got, ok := r.peerURL(req, "counts", []byte(key), KeyLocation{Instance: "b"}, ErrNotOwner)
		if !ok || got != "http://b:1/stores/counts"+want {
			t.Errorf("redirect of key %q: %q %v, want ...%s", key, got, ok, want)
		}
	}
}

// A caller that goes away while its query waits (here, for a partition
// count another request is asking the brokers for) gets no answer
// written and no warning logged: it is not the instance's failure.
func TestServeKeyCallerGone(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	r := stoppedRunner(t, Logger(zap.New(core)))
	r.queryParts.init()
	r.queryParts.asking["in"] = make(chan struct{}) // a refresh under way, never ending
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/stores/counts/keys/k1", nil)
	rec := httptest.NewRecorder()
	r.QueryHandler().ServeHTTP(rec, req)
	if rec.Body.Len() != 0 || logs.Len() != 0 {
		t.Fatalf("a gone caller: answered %d %q, logged %v; want nothing", rec.Code, rec.Body.String(), logs.All())
	}
}
