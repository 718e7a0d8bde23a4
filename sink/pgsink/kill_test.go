package pgsink_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/sink/pgsink"
)

// TestWorkerProcess is the worker TestKilledWorkersWriteOnce starts in a
// process of its own; it skips in a normal run.
func TestWorkerProcess(t *testing.T) {
	if os.Getenv("PGSINK_WORKER") != "1" {
		t.Skip("a worker of TestKilledWorkersWriteOnce")
	}
	p, err := pgxpool.New(context.Background(), os.Getenv("EOS_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Brokers = strings.Split(os.Getenv("PGSINK_BROKERS"), ",")
	cfg.AppID, cfg.InstanceID = os.Getenv("PGSINK_GROUP"), os.Getenv("PGSINK_INSTANCE")
	cfg.SessionTimeout, cfg.RebalanceTimeout, cfg.MaxBatchRecords = 6*time.Second, 10*time.Second, 200
	write := insertRows(os.Getenv("PGSINK_TABLE"))
	s, err := pgsink.New(cfg, p, []string{os.Getenv("PGSINK_TOPIC")}, func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		if err := write(ctx, tx, b); err != nil {
			return err
		}
		time.Sleep(30 * time.Millisecond) // so a kill often lands inside a transaction
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestKilledWorkersWriteOnce runs two worker processes and SIGKILLs one
// of them every few hundred milliseconds, restarting it at once under its
// instance id (static membership), until the input is written: every
// record must be in the table once.
func TestKilledWorkersWriteOnce(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink-kill")
	env.CreateTopics(t, 4, topic)
	const n = 20000
	seed(t, env, topic, 0, n)
	rows := table(t, p)
	start := func(instance string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "PGSINK_WORKER=1", "PGSINK_BROKERS="+strings.Join(env.Brokers, ","),
			"PGSINK_GROUP="+group, "PGSINK_INSTANCE="+instance, "PGSINK_TOPIC="+topic, "PGSINK_TABLE="+rows,
			"EOS_POSTGRES_URL="+pgURL(t))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	workers := map[string]*exec.Cmd{"w0": start("w0"), "w1": start("w1")}
	defer func() {
		for _, w := range workers {
			w.Process.Kill()
			w.Wait()
		}
	}()
	stored := func() (next int64) {
		retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
			return p.QueryRow(ctx, "SELECT coalesce(sum(next_offset), 0) FROM eosflow_offsets WHERE group_id = $1", group).Scan(&next)
		})
		return next
	}
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	for stored() < n {
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills, the stored offsets sum to %d of %d after 3 minutes", kills, stored(), n)
		}
		time.Sleep(time.Duration(200+rand.IntN(400)) * time.Millisecond)
		if kills < 10 {
			name := []string{"w0", "w1"}[rand.IntN(2)]
			if err := workers[name].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			workers[name].Wait()
			kills++
			workers[name] = start(name)
		}
	}
	got, distinct := counts(t, p, rows)
	if got != n || distinct != n {
		t.Errorf("after %d kills the table holds %d rows of %d distinct records, want %d of %d", kills, got, distinct, n, n)
	}
	if kills == 0 {
		t.Error("no worker was killed")
	}
	t.Logf("%d SIGKILLs; %d rows of %d records", kills, got, distinct)
}
