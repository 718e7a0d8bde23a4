package eos_test

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
)

// keyReply is the JSON of GET /stores/{store}/keys/{key}.
type keyReply struct {
	Store, Key, Status, Error string
	Value                     []byte
	Partition                 *int32
}

func getKey(t *testing.T, srv *httptest.Server, store, key string) (int, keyReply) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/stores/" + store + "/keys/" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r keyReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET %s/%s: %v", store, key, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET %s/%s: 503 without Retry-After", store, key)
	}
	return resp.StatusCode, r
}

// QueryHandler answers a key's committed value with its partition
// (200), an absent key and an unknown store (404), a key whose partition
// another instance owns (421, with the partition), and a stopped Runner
// (503).
func TestQueryHTTP(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "in", "out")
	const n = 400
	conformance.SeedRange(t, env, "in", 0, n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	a := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	srv := httptest.NewServer(a.R.QueryHandler())
	defer srv.Close()
	a.WaitCommitted(t, n, 60*time.Second)
	// Handler, which metrics_addr serves, never answers store contents.
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
	want := map[string]int64{}
	for i := range n {
		want[string(verdict.Key(i, conformance.SeedKeys))]++
	}
	for k, c := range want {
		var code int
		var r keyReply
		conformance.Until(t, 30*time.Second, "key "+k+" answered", func() bool {
			code, r = getKey(t, srv, "counts", k)
			return code != http.StatusServiceUnavailable
		})
		if code != http.StatusOK || r.Status != "found" || len(r.Value) != 8 || int64(binary.BigEndian.Uint64(r.Value)) != c || r.Partition == nil {
			t.Fatalf("GET key %s: %d %+v, want 200 with count %d and its partition", k, code, r, c)
		}
	}
	if code, r := getKey(t, srv, "counts", "no-such-key"); code != http.StatusNotFound || r.Status != "absent" || r.Partition == nil {
		t.Fatalf("absent key: %d %+v, want 404 absent with its partition", code, r)
	}
	if code, r := getKey(t, srv, "nope", "k1"); code != http.StatusNotFound || r.Status != "unknown_store" {
		t.Fatalf("unknown store: %d %+v, want 404 unknown_store", code, r)
	}

	bcfg := cfg
	bcfg.InstanceID = "b"
	b := conformance.Start(t, bcfg, conformance.CountTopology("in", "out", state.Memory()))
	conformance.WaitAssigned(t, env, "app", "b")
	conformance.Until(t, 30*time.Second, "a key owned by b answered 421 by a", func() bool {
		for k := range want {
			if code, r := getKey(t, srv, "counts", k); code == http.StatusMisdirectedRequest {
				if r.Status != "not_owner" || r.Partition == nil {
					t.Fatalf("not owned: %+v, want status not_owner and the partition", r)
				}
				return true
			}
		}
		return false
	})
	b.Stop()
	a.Stop()
	if err := a.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if code, r := getKey(t, srv, "counts", "k1"); code != http.StatusServiceUnavailable || r.Status != "stopped" {
		t.Fatalf("after Run: %d %+v, want 503 stopped", code, r)
	}
}
