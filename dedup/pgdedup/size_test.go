package pgdedup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eosflow/eosflow/dedup/pgdedup"
	"github.com/eosflow/eosflow/tools/dedupsize"
	"github.com/eosflow/eosflow/tools/servertest"
)

// TestStoreSizesMatchServers marks 20,000 UUID ids in a Store on a real
// PostgreSQL and compares the disk they took with what `eosctl dedup size
// --store postgres` estimates: more than 25% off fails.
func TestStoreSizesMatchServers(t *testing.T) {
	const n = 20000
	t.Run("postgres", func(t *testing.T) {
		url := servertest.PostgresURL(t)
		table := fmt.Sprintf("eosflow_dedup_size_%d", time.Now().UnixNano())
		p, err := pgdedup.New(t.Context(), url, pgdedup.Table(table))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
			conn.Close(context.Background())
		}()
		for range n {
			if _, err := p.Mark(t.Context(), uuid.NewString(), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		var size int64
		if err := conn.QueryRow(t.Context(), "SELECT pg_total_relation_size($1)", table).Scan(&size); err != nil {
			t.Fatal(err)
		}
		dedupsize.CheckMeasured(t, "postgres", n, 36, float64(size))
	})
}
