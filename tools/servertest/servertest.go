// Package servertest finds the PostgreSQL and Redis servers that tests
// run against: the one named by EOS_POSTGRES_URL or EOS_REDIS_URL (started
// with integration/postgres/pg.sh and integration/redis/redis.sh, or
// docker compose), else a container started through testcontainers-go
// when a container engine answers, else none, and the test skips saying
// how to get one. Containers are started once per test binary, on first
// use, and terminated by Main.
package servertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"

	"github.com/eosflow/eosflow/tools/kafkatest"
)

// The variables that name a running server, and the images a container is
// started from when they are unset.
const (
	EnvPostgresURL   = "EOS_POSTGRES_URL"
	EnvRedisURL      = "EOS_REDIS_URL"
	EnvPostgresImage = "EOS_POSTGRES_IMAGE"
	EnvRedisImage    = "EOS_REDIS_IMAGE"
	// EnvRequire=1 fails a test that finds no server instead of skipping
	// it, so that a CI step meant to use containers cannot pass by skipping.
	EnvRequire = "EOS_REQUIRE_SERVERS"
)

// The official images; integration/container/build-image.sh --sinks
// builds look-alikes from Debian packages (localhost/postgres:15-local,
// localhost/redis:7-local) where no registry is reachable.
const (
	DefaultPostgresImage = "postgres:15"
	DefaultRedisImage    = "redis:7"
)

// server is one container a test binary starts, on first use.
type server struct {
	once  sync.Once
	c     testcontainers.Container
	url   string
	image string
	skip  string // why there is no server
	err   error
}

var postgres, redisServer server

// PostgresURL is the database for t: EOS_POSTGRES_URL, else a PostgreSQL
// container's (database eosflow, trust authentication), else t skips.
// The URL is also put into EOS_POSTGRES_URL, so that worker processes a
// test starts use the same server.
func PostgresURL(t testing.TB) string {
	t.Helper()
	url, why := LookupPostgres(t)
	if url == "" {
		t.Skip(why)
	}
	return url
}

// LookupPostgres is PostgresURL for a test that also runs without a
// database: "" and why there is none instead of skipping.
func LookupPostgres(t testing.TB) (url, why string) {
	t.Helper()
	return postgres.get(t, EnvPostgresURL, "integration/postgres/pg.sh", startPostgres)
}

// RedisURL is the Redis for t: EOS_REDIS_URL, else a Redis container's
// (no persistence), else t skips. The URL is also put into EOS_REDIS_URL.
func RedisURL(t testing.TB) string {
	t.Helper()
	url, why := LookupRedis(t)
	if url == "" {
		t.Skip(why)
	}
	return url
}

// LookupRedis is RedisURL for a test that also runs without a Redis: ""
// and why there is none instead of skipping.
func LookupRedis(t testing.TB) (url, why string) {
	t.Helper()
	return redisServer.get(t, EnvRedisURL, "integration/redis/redis.sh", startRedis)
}

func (s *server) get(t testing.TB, env, script string, start func(*server)) (string, string) {
	t.Helper()
	if url := os.Getenv(env); url != "" && s.c == nil {
		return url, ""
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.skip = kafkatest.EngineAnswers(ctx); s.skip == "" {
			start(s)
		}
	})
	switch {
	case s.skip != "" && os.Getenv(EnvRequire) == "1":
		t.Fatalf("%s is not set and no container engine answers (%s), and %s=1 requires a server", env, s.skip, EnvRequire)
	case s.skip != "":
		return "", fmt.Sprintf("%s is not set and no container engine answers (%s): run %s start and export %s=$(%s url), or docker compose --profile sinks up -d",
			env, s.skip, script, env, script)
	case s.err != nil:
		t.Fatalf("starting a container from %s: %v", s.image, s.err)
	}
	os.Setenv(env, s.url)
	return s.url, ""
}

// Main runs the tests, then terminates the containers they started,
// whether they passed or not. Call it from TestMain: os.Exit(Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	for _, s := range []*server{&postgres, &redisServer} {
		if s.c == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := s.c.Terminate(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "servertest: terminating container %s: %v\n", s.c.GetContainerID(), err)
			if code == 0 {
				code = 1
			}
			continue
		}
		fmt.Fprintf(os.Stderr, "servertest: terminated container %s (%s)\n", s.c.GetContainerID()[:12], s.image)
	}
	return code
}

func image(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// run starts req on the host network, where the server listens on the
// free port the request chose, and waits until ready answers.
func (s *server) run(req testcontainers.ContainerRequest, ready func(context.Context) error) {
	req.HostConfigModifier = func(hc *container.HostConfig) { hc.NetworkMode = "host" }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if c != nil {
		s.c = c
	}
	if err != nil {
		s.err = err
		return
	}
	for {
		err = ready(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			s.err = fmt.Errorf("container %s started but %s never answered: %w", c.GetContainerID()[:12], s.url, err)
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "servertest: started container %s (%s) at %s in %s\n",
		c.GetContainerID()[:12], s.image, s.url, time.Since(begin).Round(time.Millisecond))
}

func startPostgres(s *server) {
	s.image = image(EnvPostgresImage, DefaultPostgresImage)
	port := kafkatest.FreePort()
	if port == 0 {
		s.err = errors.New("no free port on 127.0.0.1")
		return
	}
	s.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/eosflow?sslmode=disable", port)
	s.run(testcontainers.ContainerRequest{
		Image: s.image,
		Env: map[string]string{
			"POSTGRES_DB":               "eosflow",
			"POSTGRES_HOST_AUTH_METHOD": "trust",
			"PGPORT":                    strconv.Itoa(port),
		},
		// On the host network, so loopback only: trust authentication
		// must not be reachable from other machines.
		Cmd: []string{"postgres", "-c", "listen_addresses=127.0.0.1"},
	}, func(ctx context.Context) error {
		// The official image restarts the server once after its
		// first set-up: a query, not just a connection, says it is up.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, s.url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(cctx, "SELECT 1")
		return err
	})
}

func startRedis(s *server) {
	s.image = image(EnvRedisImage, DefaultRedisImage)
	port := kafkatest.FreePort()
	if port == 0 {
		s.err = errors.New("no free port on 127.0.0.1")
		return
	}
	s.url = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	s.run(testcontainers.ContainerRequest{
		Image: s.image,
		// Loopback only, as for PostgreSQL.
		Cmd: []string{"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"},
	}, func(ctx context.Context) error {
		opt, err := redis.ParseURL(s.url)
		if err != nil {
			return err
		}
		cl := redis.NewClient(opt)
		defer cl.Close()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return cl.Ping(cctx).Err()
	})
}
