package redisdedup_test

import (
	"os"
	"testing"

	"github.com/eosflow/eosflow/tools/servertest"
)

// TestMain terminates the Redis container the tests started when no server
// was named (servertest).
func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }
