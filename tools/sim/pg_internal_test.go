package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The rows judge can fail: a row written twice, or one missing, after a
// clean run of the Postgres sink is reported as such.
func TestTheRowsJudgeCatchesARepeatAndALoss(t *testing.T) {
	db := PostgresFromEnv()
	if db == "" {
		t.Skip("no database for the Postgres sink: set EOS_POSTGRES_URL, e.g. $(integration/postgres/pg.sh start)")
	}
	for _, c := range []struct {
		name, sql string // sql names the rows table "rows"
		more      int    // rows it adds to partition 0
	}{
		{"a repeat", `INSERT INTO rows SELECT * FROM rows WHERE "offset" = 7 AND partition = 0`, 1},
		{"a loss", `DELETE FROM rows WHERE "offset" = 7 AND partition = 0`, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n int64
			tamper := func(s *sim) error {
				ctx := context.Background()
				if err := s.pg.QueryRow(ctx, `SELECT count(*) FROM `+s.tables.rows+` WHERE partition = 0`).Scan(&n); err != nil {
					return err
				}
				tag, err := s.pg.Exec(ctx, strings.ReplaceAll(c.sql, "rows", s.tables.rows))
				if err == nil && tag.RowsAffected() != 1 {
					t.Errorf("%s: %d rows changed, want 1", c.sql, tag.RowsAffected())
				}
				return err
			}
			r := run(context.Background(), Schedule{Pipeline: PgSink}, Config{Postgres: db}, tamper)
			distinct := min(n, n+int64(c.more))
			want := fmt.Sprintf("partition 0 of %d records: rows=%d distinct=%d", n, n+int64(c.more), distinct)
			if r.Kind != KindRows || !strings.Contains(r.Failure, want) {
				t.Fatalf("after %s: kind %q, failure %q; want %q reported", c.name, r.Kind, r.Failure, want)
			}
		})
	}
}
