package pgsink_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/sink/pgsink"
)

// BenchmarkIntoPostgres writes b.N records (4 partitions, 500-record
// batches, COPY into a table) with the exactly-once sink and with the
// at-least-once loop most consumers hand-write: the same COPY in its own
// transaction, then a synchronous Kafka offset commit. Run both in one go
// and compare rows/s:
//
//	EOS_POSTGRES_URL=$(integration/postgres/pg.sh url) go test -run '^$' -bench IntoPostgres -benchtime 50000x ./sink/pgsink/
func BenchmarkIntoPostgres(b *testing.B) {
	for _, mode := range []string{"exactly-once", "at-least-once"} {
		b.Run(mode, func(b *testing.B) {
			p := pool(b)
			env := broker(b)
			topic, group := env.Name("pgsink-bench"), env.Name("pgsink-bench")
			env.CreateTopics(b, 4, topic)
			seed(b, env, topic, 0, b.N)
			rows := table(b, p)
			b.ResetTimer()
			start := time.Now()
			switch mode {
			case "exactly-once":
				s, err := pgsink.New(testConfig(env, group, "bench-0"), p, []string{topic}, insertRows(rows))
				if err != nil {
					b.Fatal(err)
				}
				stop := running(b, s)
				waitFor(b, 10*time.Minute, "all records", func() bool { return s.Stats().Records >= uint64(b.N) })
				b.StopTimer()
				stop()
			case "at-least-once":
				cl := env.Client(b, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
					kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				write := insertRows(rows)
				for done := 0; done < b.N; {
					recs := cl.PollRecords(b.Context(), 500).Records()
					if err := pgx.BeginFunc(b.Context(), p, func(tx pgx.Tx) error {
						return write(b.Context(), tx, batchOf(recs))
					}); err != nil {
						b.Fatal(err)
					}
					if err := cl.CommitRecords(b.Context(), recs...); err != nil {
						b.Fatal(err)
					}
					done += len(recs)
				}
				b.StopTimer()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
			if got, _ := counts(b, p, rows); got != b.N {
				b.Fatalf("%d rows, want %d", got, b.N)
			}
		})
	}
}

func batchOf(recs []*kgo.Record) *pgsink.Batch { return &pgsink.Batch{Records: recs} }
