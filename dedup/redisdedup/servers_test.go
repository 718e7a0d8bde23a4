package dedup_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
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
	p, err := dedup.NewPostgres(t.Context(), url, dedup.Table(table))
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

func TestNewPostgresRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		url  string
		opts []dedup.PostgresOption
	}{
		{"postgres://postgres@127.0.0.1:1/x", []dedup.PostgresOption{dedup.Table("bad-name")}},
		{"postgres://postgres@127.0.0.1:1/x", []dedup.PostgresOption{dedup.Table("a;DROP TABLE b")}},
		{"postgres://postgres@127.0.0.1:1/x", []dedup.PostgresOption{dedup.Timeout(0)}},
		{"::not a url", nil},
	} {
		if _, err := dedup.NewPostgres(t.Context(), c.url, c.opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("NewPostgres(%q, %d options): err = %v, want ErrInvalid", c.url, len(c.opts), err)
		}
	}
}

func TestNewRedisRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		url  string
		opts []dedup.RedisOption
	}{
		{"http://127.0.0.1:1", nil},
		{"redis://127.0.0.1:1/0", []dedup.RedisOption{dedup.Timeout(-time.Second)}},
	} {
		if _, err := dedup.NewRedis(c.url, c.opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("NewRedis(%q, %d options): err = %v, want ErrInvalid", c.url, len(c.opts), err)
		}
	}
}

func TestClosedStoresRefuseCalls(t *testing.T) {
	r, err := dedup.NewRedis("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	if _, err := r.Mark(t.Context(), "a", time.Minute); !errors.Is(err, dedup.ErrClosed) {
		t.Errorf("Mark on a closed Redis store: %v, want ErrClosed", err)
	}
}

// TestRedisSortedSetPurgeRemovesOnlyExpiredMembers is the article's
// ZREMRANGEBYSCORE cleanup: expired members go, live ones stay marked.
func TestRedisSortedSetPurgeRemovesOnlyExpiredMembers(t *testing.T) {
	url := servertest.RedisURL(t)
	key := fmt.Sprintf("eosflow:dedup-test:purge:%d", time.Now().UnixNano())
	z, err := dedup.NewRedisSortedSet(url, key)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	defer dropRedisKey(t, url, key)
	for i := range 5 {
		if _, err := z.Mark(t.Context(), fmt.Sprint("short-", i), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := z.Mark(t.Context(), "long", time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n, err := z.Purge(t.Context()); err != nil || n != 5 {
		t.Errorf("Purge = %d, %v; want the 5 expired members", n, err)
	}
	if first, err := z.Mark(t.Context(), "long", time.Hour); err != nil || first {
		t.Errorf(`Mark("long") after Purge = %v, %v; want false: a live id must survive Purge`, first, err)
	}
	if err := z.Forget(t.Context(), "long"); err != nil {
		t.Fatal(err)
	}
	if n, err := z.Purge(t.Context()); err != nil || n != 0 {
		t.Errorf("Purge of an empty set = %d, %v; want 0, nil", n, err)
	}
	if _, err := dedup.NewRedisSortedSet(url, ""); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("NewRedisSortedSet with an empty key: %v, want ErrInvalid", err)
	}
}

// A RedisSortedSet's pending ids live in a hash beside the set. An id that
// expired while pending and was marked again (Mark) is done: its stale
// pending entry must not make a Claim take it over and run the effect
// again. Purge removes the pending entries of the members it removes.
func TestRedisSortedSetPendingEntriesFollowTheirMembers(t *testing.T) {
	url := servertest.RedisURL(t)
	key := fmt.Sprintf("eosflow:dedup-test:pending:%d", time.Now().UnixNano())
	z, err := dedup.NewRedisSortedSet(url, key)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	defer dropRedisKey(t, url, key)
	defer dropRedisKey(t, url, "{"+key+"}:pending")
	ctx := t.Context()
	for _, id := range []string{"remarked", "purged"} {
		if c, err := z.Claim(ctx, id, "a", 50*time.Millisecond, 50*time.Millisecond); err != nil || c.State != dedup.Claimed {
			t.Fatalf("Claim(%s) = %+v, %v", id, c, err)
		}
	}
	time.Sleep(150 * time.Millisecond)
	if first, err := z.Mark(ctx, "remarked", time.Hour); err != nil || !first {
		t.Fatalf("Mark of an expired pending id = %v, %v; want first", first, err)
	}
	if c, err := z.Claim(ctx, "remarked", "b", time.Minute, time.Hour); err != nil || c.State != dedup.Done {
		t.Errorf("Claim by b of an id marked done = %+v, %v; want done", c, err)
	}
	if n, err := z.Purge(ctx); err != nil || n != 1 {
		t.Errorf("Purge = %d, %v; want the expired pending member", n, err)
	}
	opt, _ := redis.ParseURL(url)
	c := redis.NewClient(opt)
	defer c.Close()
	if n, err := c.HLen(ctx, "{"+key+"}:pending").Result(); err != nil || n != 0 {
		t.Errorf("pending entries left after Purge: %d, %v; want 0", n, err)
	}
}

// A StoreError names store, address, operation and id, and asks whether the
// server is reachable only when the error says it was not.
func TestStoreErrorMessage(t *testing.T) {
	refused := &dedup.StoreError{Store: "redis", Addr: "127.0.0.1:1", Op: "mark", ID: "m-1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	if got, want := refused.Error(), `dedup: redis at 127.0.0.1:1: mark "m-1": dial: connection refused: is the server up and reachable?`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	denied := &dedup.StoreError{Store: "postgres", Addr: "db:5432", Op: "purge", Err: errors.New("permission denied for table eosflow_dedup")}
	if got, want := denied.Error(), `dedup: postgres at db:5432: purge: permission denied for table eosflow_dedup`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(denied, dedup.ErrStore) {
		t.Error("a StoreError does not match ErrStore")
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
	p, err := dedup.NewPostgres(t.Context(), url, dedup.Table("eosflow_dedup_test"))
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

// A sorted set key with braces but no hash tag is refused: its pending
// hash could not share its hash slot in Redis Cluster.
func TestRedisSortedSetRefusesAKeyWithBracesButNoTag(t *testing.T) {
	for _, key := range []string{"a}b", "a{}b", "{}ids"} {
		if _, err := dedup.NewRedisSortedSet("redis://127.0.0.1:1/0", key); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("NewRedisSortedSet(%q): %v, want ErrInvalid", key, err)
		}
	}
	for _, key := range []string{"ids", "{app}:ids"} {
		if _, err := dedup.NewRedisSortedSet("redis://127.0.0.1:1/0", key); err != nil {
			t.Errorf("NewRedisSortedSet(%q): %v", key, err)
		}
	}
}
