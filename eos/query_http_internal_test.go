package eos

import (
	"context"
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

// A caller that goes away while its query waits (here, for a partition
// count another request is asking the brokers for) gets no answer
// written and no warning logged: it is not the instance's failure.
func TestServeKeyCallerGone(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = []string{"127.0.0.1:1"}, "app", "a"
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes(), topology.Named("in"))
	counts := topology.Count(topology.GroupByKey(src, "by-key"), "counts", state.Memory())
	topology.ToTable(counts, "out", codec.JSON[int64](), topology.Named("out"))
	core, logs := observer.New(zap.WarnLevel)
	r, err := New(cfg, top, Logger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
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
