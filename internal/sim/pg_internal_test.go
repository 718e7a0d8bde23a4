package sim

import (
	"context"
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
		name, sql, want string // sql names the rows table "rows"
	}{
		{"a repeat", `INSERT INTO rows SELECT * FROM rows WHERE "offset" = 7 AND partition = 0`, "rows=301 distinct=300"},
		{"a loss", `DELETE FROM rows WHERE "offset" = 7 AND partition = 0`, "rows=299 distinct=299"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tamper := func(s *sim) error {
				tag, err := s.pg.Exec(context.Background(), strings.ReplaceAll(c.sql, "rows", s.tables.rows))
				if err == nil && tag.RowsAffected() != 1 {
					t.Errorf("%s: %d rows changed, want 1", c.sql, tag.RowsAffected())
				}
				return err
			}
			r := run(context.Background(), Schedule{Pipeline: PgSink}, Config{Postgres: db}, tamper)
			if r.Kind != KindRows || !strings.Contains(r.Failure, c.want) {
				t.Fatalf("after %s: kind %q, failure %q; want %q reported", c.name, r.Kind, r.Failure, c.want)
			}
		})
	}
}
