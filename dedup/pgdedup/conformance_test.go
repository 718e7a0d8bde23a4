package pgdedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
	"github.com/eosflow/eosflow/dedup/pgdedup"
	"github.com/eosflow/eosflow/tools/servertest"
)

// backend is the Store under test, on the PostgreSQL servertest finds (a
// URL, else a container); url is empty, and why says why, when there is
// none.
func backend(t *testing.T) (b deduptest.Backend, url, why string) {
	url, why = servertest.LookupPostgres(t)
	return deduptest.Backend{
		Open: func(t *testing.T) dedup.Store {
			p, err := pgdedup.New(t.Context(), url, pgdedup.Table("eosflow_dedup_test"))
			if err != nil {
				t.Fatalf("EOS_POSTGRES_URL=%s: %v", url, err)
			}
			t.Cleanup(func() { p.Close() })
			return p
		},
		Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
			p, err := pgdedup.New(ctx, "postgres://postgres@"+addr+"/eosflow?sslmode=disable", pgdedup.Timeout(timeout))
			if err != nil {
				return err
			}
			defer p.Close()
			_, err = p.Mark(ctx, "m-1", time.Minute)
			return err
		},
	}, url, why
}

// TestConformance runs the store through the promises of every store: the
// first mark wins, exactly one of concurrent marks wins, an expired or
// forgotten id is new again, bad arguments are refused, and an unreachable
// server is a prompt error naming its address.
func TestConformance(t *testing.T) {
	b, url, why := backend(t)
	if url == "" {
		// The unreachable cases need no server, so they run everywhere.
		deduptest.Run(t, deduptest.Backend{Unreachable: b.Unreachable})
		t.Skip(why)
	}
	deduptest.Run(t, b)
}

// TestLeaseConformance runs the store through the promises mark-before
// relies on (dedup.Leaser): a claimed id is pending for its owner, never
// reported done, until Complete; another owner waits while the lease lives
// and takes it over once it expired; Release removes only its owner's
// pending mark; of concurrent claims exactly one wins.
func TestLeaseConformance(t *testing.T) {
	b, url, why := backend(t)
	if url == "" {
		t.Skip(why)
	}
	deduptest.RunLeaser(t, func(t *testing.T) dedup.Leaser { return b.Open(t).(dedup.Leaser) })
}
