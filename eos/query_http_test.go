package eos_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kgo"
)

// keyReply is the JSON of GET /stores/{store}/keys/{key}.
type keyReply struct {
	Store, Key, Status, Error, Instance string
	KeyBase64                           []byte `json:"key_base64"`
	Value                               []byte
	Partition                           *int32
}

// noRedirects shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// getKey asks base for key of store, escaped as eos.PathSegment does,
// following redirects.
func getKey(t *testing.T, base, store, key string) (int, keyReply) {
	t.Helper()
	code, r, _ := getURL(t, http.DefaultClient, base+"/stores/"+store+"/keys/"+eos.PathSegment(key))
	return code, r
}

// getURL asks u with cl; the last return is the redirect's Location.
func getURL(t *testing.T, cl *http.Client, u string) (int, keyReply, string) {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r keyReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET %s: 503 without Retry-After", u)
	}
	return resp.StatusCode, r, resp.Header.Get("Location")
}

// binaryKey is a key that is not UTF-8 and holds what a URL escapes.
const binaryKey = "\xff\x00/ %k?"

// QueryHandler answers a key's committed value with its partition
// (200), an absent key and an unknown store (404), a key whose partition
// another instance owns (421, naming it), and a stopped Runner (503). A
// key is URL-escaped in the path (the keys "." and ".." as %2E and
// %2E%2E) and comes back byte for byte.
func TestQueryHTTP(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "in", "out")
	const n = 400
	conformance.SeedRange(t, env, "in", 0, n)
	for _, k := range []string{binaryKey, ".", ".."} {
		produceInKey(t, env, k)
	}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	a := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	srv := httptest.NewServer(a.R.QueryHandler())
	defer srv.Close()
	a.WaitCommitted(t, n+3, 60*time.Second)
	// Handler, which metrics_addr serves by default, never answers store contents.
	plain := httptest.NewServer(a.R.Handler())
	defer plain.Close()
	resp, err := http.Get(plain.URL + "/stores/counts/keys/k1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("Handler answered GET /stores/counts/keys/k1 with %d, want 404: store contents are QueryHandler's", resp.StatusCode)
	}
	want := map[string]int64{binaryKey: 1, ".": 1, "..": 1}
	for i := range n {
		want[string(verdict.Key(i, conformance.SeedKeys))]++
	}
	for k, c := range want {
		var code int
		var r keyReply
		conformance.Until(t, 30*time.Second, "key "+k+" answered", func() bool {
			code, r = getKey(t, srv.URL, "counts", k)
			return code != http.StatusServiceUnavailable
		})
		if code != http.StatusOK || r.Status != "found" || len(r.Value) != 8 || int64(binary.BigEndian.Uint64(r.Value)) != c || r.Partition == nil {
			t.Fatalf("GET key %q: %d %+v, want 200 with count %d and its partition", k, code, r, c)
		}
		if string(r.KeyBase64) != k || r.Instance != "a" {
			t.Fatalf("GET key %q: key_base64 %q, instance %q, want the key's bytes and a", k, r.KeyBase64, r.Instance)
		}
	}
	if code, r := getKey(t, srv.URL, "counts", "no-such-key"); code != http.StatusNotFound || r.Status != "absent" || r.Partition == nil {
		t.Fatalf("absent key: %d %+v, want 404 absent with its partition", code, r)
	}
	if code, r := getKey(t, srv.URL, "nope", "k1"); code != http.StatusNotFound || r.Status != "unknown_store" {
		t.Fatalf("unknown store: %d %+v, want 404 unknown_store", code, r)
	}

	bcfg := cfg
	bcfg.InstanceID = "b"
	b := conformance.Start(t, bcfg, conformance.CountTopology("in", "out", state.Memory()))
	conformance.WaitAssigned(t, env, "app", "b")
	conformance.Until(t, 30*time.Second, "a key owned by b answered 421 by a, naming b", func() bool {
		for k := range want {
			if code, r := getKey(t, srv.URL, "counts", k); code == http.StatusMisdirectedRequest {
				if r.Status != "not_owner" || r.Partition == nil {
					t.Fatalf("not owned: %+v, want status not_owner and the partition", r)
				}
				return r.Instance == "b"
			}
		}
		return false
	})
	b.Stop()
	a.Stop()
	if err := a.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if code, r := getKey(t, srv.URL, "counts", "k1"); code != http.StatusServiceUnavailable || r.Status != "stopped" {
		t.Fatalf("after Run: %d %+v, want 503 stopped", code, r)
	}
}

// produceInKey writes one record keyed key to topic in.
func produceInKey(t *testing.T, env *kafkatest.Env, key string) {
	t.Helper()
	cl := env.Client(t)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: []byte(key), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// With QueryPeers, a key another instance holds is redirected there
// (307), and that instance answers it; a redirected request is answered
// where it lands, never sent on again. metrics_serve_queries serves the
// queries on metrics_addr.
func TestQueryHTTPRedirect(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "in", "out")
	const n = 200
	conformance.SeedRange(t, env, "in", 0, n)
	peers := map[string]string{}
	peer := eos.QueryPeers(func(id string) (string, bool) { u, ok := peers[id]; return u, ok })
	start := func(id string) *conformance.Run {
		cfg := env.Config("app", id, config.ExactlyOnce)
		cfg.MetricsAddr, cfg.MetricsServeQueries = "127.0.0.1:0", true
		r := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()), peer)
		conformance.Until(t, 30*time.Second, id+" serves metrics_addr", func() bool { return r.R.MetricsAddr() != "" })
		peers[id] = "http://" + r.R.MetricsAddr()
		return r
	}
	a := start("a")
	a.WaitCommitted(t, n, 60*time.Second)
	b := start("b")
	conformance.WaitAssigned(t, env, "app", "b")
	want := map[string]int64{}
	for i := range n {
		want[string(verdict.Key(i, conformance.SeedKeys))]++
	}
	redirected := false
	conformance.Until(t, 60*time.Second, "every key answered through either instance", func() bool {
		for k, c := range want {
			for _, base := range []string{peers["a"], peers["b"]} {
				code, r := getKey(t, base, "counts", k)
				if code != http.StatusOK {
					return false // moving: ask again
				}
				if got := int64(binary.BigEndian.Uint64(r.Value)); got != c {
					t.Fatalf("key %s through %s: %d, want %d", k, base, got, c)
				}
			}
		}
		return true
	})
	for k := range want {
		code, r, loc := getURL(t, noRedirects, peers["a"]+"/stores/counts/keys/"+url.PathEscape(k))
		if code != http.StatusTemporaryRedirect {
			continue
		}
		redirected = true
		if r.Instance != "b" || !strings.HasPrefix(loc, peers["b"]+"/stores/counts/keys/") || !strings.HasSuffix(loc, "?hop=1") {
			t.Fatalf("redirect of %s: instance %q to %q, want b's URL with hop=1", k, r.Instance, loc)
		}
		// The same request redirected once already is answered where it lands.
		code, r, loc = getURL(t, noRedirects, peers["a"]+"/stores/counts/keys/"+url.PathEscape(k)+"?hop=1")
		if code != http.StatusMisdirectedRequest || loc != "" || r.Instance != "b" {
			t.Fatalf("a redirected request for %s at a non-owner: %d to %q, want 421 naming b", k, code, loc)
		}
		break
	}
	if !redirected {
		t.Fatal("no key of the 200 was redirected by a, yet b holds partitions")
	}
	b.Stop()
	a.Stop()
	_ = a.Wait(t, 60*time.Second)
}
