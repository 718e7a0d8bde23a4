package pgsink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/sink/pgsink"
)

type event struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Version int64  `json:"version"`
	Balance int64  `json:"balance"`
}

// TestRowsPatterns runs the article's three patterns on one input with
// repeated ids, out-of-order versions and an undecodable record: Insert
// with a unique key keeps the first of each id and counts the rest,
// Upsert keeps the last write, Versioned keeps the highest version, and
// the undecodable record lands in the dead-letter table.
func TestRowsPatterns(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic := env.Name("pgsink-rows")
	env.CreateTopics(t, 1, topic)
	sfx := rand.Uint32()
	events, balances, versions, dead := fmt.Sprintf("pgsink_events_%d", sfx), fmt.Sprintf("pgsink_bal_%d", sfx), fmt.Sprintf("pgsink_ver_%d", sfx), fmt.Sprintf("pgsink_dead_%d", sfx)
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+events+` (id text PRIMARY KEY, account text, balance bigint);
CREATE TABLE IF NOT EXISTS `+balances+` (account text PRIMARY KEY, balance bigint);
CREATE TABLE IF NOT EXISTS `+versions+` (account text PRIMARY KEY, version bigint, balance bigint)`)
		return err
	})
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+events+", "+balances+", "+versions+", "+dead)
	})
	// Versions of account a arrive 1, 3, 2 (2 is late), each event twice.
	in := []event{{"e1", "a", 1, 10}, {"e2", "b", 1, 5}, {"e3", "a", 3, 30}, {"e4", "a", 2, 20}}
	var recs []*kgo.Record
	for _, e := range in {
		v, _ := json.Marshal(e)
		recs = append(recs, &kgo.Record{Topic: topic, Value: v}, &kgo.Record{Topic: topic, Value: v})
	}
	recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("{not json")})
	if err := kafkautil.ProduceAll(t.Context(), env.Client(t), len(recs), func(i int) *kgo.Record { return recs[i] }); err != nil {
		t.Fatal(err)
	}
	type job struct {
		name string
		h    pgsink.Handler
	}
	jobs := []job{
		{"insert", pgsink.Rows(codec.JSON[event](), pgsink.Insert(events, "id", "account", "balance"),
			func(r processor.Record[event]) ([]any, error) {
				return []any{r.Value.ID, r.Value.Account, r.Value.Balance}, nil
			})},
		{"upsert", pgsink.Rows(codec.JSON[event](), pgsink.Upsert(balances, []string{"account"}, "account", "balance"),
			func(r processor.Record[event]) ([]any, error) { return []any{r.Value.Account, r.Value.Balance}, nil })},
		{"versioned", pgsink.Rows(codec.JSON[event](), pgsink.Versioned(versions, []string{"account"}, "version", "account", "version", "balance"),
			func(r processor.Record[event]) ([]any, error) {
				return []any{r.Value.Account, r.Value.Version, r.Value.Balance}, nil
			})},
	}
	stats := map[string]pgsink.Stats{}
	for _, j := range jobs {
		s, err := pgsink.New(testConfig(env, env.Name("pgsink-"+j.name), "i1"), p, []string{topic}, j.h, pgsink.DeadLetters(dead))
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, s)
		waitFor(t, time.Minute, j.name+": all records", func() bool { return s.Stats().Records == uint64(len(recs)) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		stats[j.name] = s.Stats()
	}
	query := func(sql string) string {
		var out string
		retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error { return p.QueryRow(ctx, sql).Scan(&out) })
		return out
	}
	if got := query("SELECT string_agg(id || ':' || balance, ',' ORDER BY id) FROM " + events); got != "e1:10,e2:5,e3:30,e4:20" {
		t.Errorf("insert: rows %s, want each event once", got)
	}
	if got := query("SELECT string_agg(account || ':' || balance, ',' ORDER BY account) FROM " + balances); got != "a:20,b:5" {
		t.Errorf("upsert: rows %s, want the last write per account (a:20, b:5)", got)
	}
	if got := query("SELECT string_agg(account || ':' || version || ':' || balance, ',' ORDER BY account) FROM " + versions); got != "a:3:30,b:1:5" {
		t.Errorf("versioned: rows %s, want the highest version per account (a:3:30, b:1:5)", got)
	}
	// Unchanged: insert skips the 4 repeats; versioned the 4 repeats and
	// the late version 2 of a; upsert changes a row on every statement.
	for name, want := range map[string]uint64{"insert": 4, "upsert": 0, "versioned": 5} {
		if st := stats[name]; st.Unchanged != want || st.DeadLettered != 1 {
			t.Errorf("%s: %d unchanged, %d dead-lettered; want %d and 1", name, st.Unchanged, st.DeadLettered, want)
		}
	}
	if got := query("SELECT count(*)::text || ' ' || min(error) FROM " + dead); !strings.HasPrefix(got, "3 decoding with json") {
		t.Errorf("dead letters: %q, want the undecodable record once per pipeline, with the decode error", got)
	}
}
