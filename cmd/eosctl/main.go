// Command eosctl operates exactly-once Kafka pipelines: it lists and aborts
// transactions, finds hanging ones, shows lag against the last stable offset,
// checks a cluster's readiness for transactions, sizes dedup stores and runs
// a local development broker.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
