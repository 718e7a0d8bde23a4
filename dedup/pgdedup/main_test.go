package pgdedup_test

import (
	"os"
	"testing"

	"github.com/eosflow/eosflow/tools/servertest"
)

// TestMain terminates the PostgreSQL container the tests started when no server
// was named (servertest).
func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }
