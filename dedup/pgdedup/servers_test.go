package pgdedup_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/pgdedup"
	"github.com/eosflow/eosflow/tools/servertest"
)

// TestPostgresPurgeDeletesOnlyExpiredRows checks the cleanup the article's
// TTL pattern needs: expired rows go, live ones stay and stay marked.
func TestPostgresPurgeDeletesOnlyExpiredRows(t *testing.T) {
	url := servertest.PostgresURL(t)
	table := fmt.Sprintf("eosflow_dedup_purge_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(t.Context(), "DROP TABLE IF EXISTS "+table)
		conn.Close(t.Context())
	})
	p, err := pgdedup.New(t.Context(), url, pgdedup.Table(table))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 5 {
		if _, err := p.Mark(t.Context(), fmt.Sprint("short-", i), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Mark(t.Context(), "long", time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	n, err := p.Purge(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("Purge deleted %d rows, want the 5 expired ones", n)
	}
	var left int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 1 {
		t.Errorf("%d rows left after Purge, want 1 (the live id)", left)
	}
	if first, err := p.Mark(t.Context(), "long", time.Hour); err != nil || first {
		t.Errorf(`Mark("long") after Purge = %v, %v; want false: a live id must survive Purge`, first, err)
	}
	if n, err := p.Purge(t.Context()); err != nil || n != 0 {
		t.Errorf("second Purge = %d, %v; want 0, nil", n, err)
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		url  string
		opts []pgdedup.Option
	}{
		{"postgres://postgres@127.0.0.1:1/x", []pgdedup.Option{pgdedup.Table("bad-name")}},
		{"postgres://postgres@127.0.0.1:1/x", []pgdedup.Option{pgdedup.Table("a;DROP TABLE b")}},
		{"postgres://postgres@127.0.0.1:1/x", []pgdedup.Option{pgdedup.Timeout(0)}},
		{"::not a url", nil},
	} {
		if _, err := pgdedup.New(t.Context(), c.url, c.opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("New(%q, %d options): err = %v, want ErrInvalid", c.url, len(c.opts), err)
		}
	}
}

// Postgres keeps marks through a crash of the server (pg.sh restart --hard:
// an immediate shutdown, then WAL recovery), and the store's pool gets over
// its dead connections by itself: the durability the Redis stores, without
// persistence, do not have.
func TestPostgresMarksSurviveServerCrash(t *testing.T) {
	url, restart := os.Getenv("EOS_POSTGRES_URL"), os.Getenv("EOS_POSTGRES_RESTART_CMD")
	if url == "" || restart == "" {
		t.Skip(`EOS_POSTGRES_URL or EOS_POSTGRES_RESTART_CMD is not set: with pg.sh, EOS_POSTGRES_RESTART_CMD="$PWD/integration/postgres/pg.sh restart --hard" (go test runs in the package directory)`)
	}
	p, err := pgdedup.New(t.Context(), url, pgdedup.Table("eosflow_dedup_test"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	id := fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
	if first, err := p.Mark(t.Context(), id, time.Hour); err != nil || !first {
		t.Fatalf("Mark before the crash = %v, %v; want true, nil", first, err)
	}
	if out, err := exec.Command("sh", "-c", restart).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", restart, err, out)
	}
	var first bool
	var errs []error
	deadline := time.Now().Add(15 * time.Second)
	for {
		if first, err = p.Mark(t.Context(), id, time.Hour); err == nil {
			break
		}
		errs = append(errs, err)
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover within 15 s of the restart: %v", errors.Join(errs...))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if first {
		t.Fatalf("Mark(%q) after the crash = true: the mark was lost", id)
	}
	t.Logf("the mark survived the crash; %d failed calls before the pool recovered %v", len(errs), errs)
}
