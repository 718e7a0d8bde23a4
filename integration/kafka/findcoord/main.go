// Command findcoord prints the node id of the broker that coordinates a
// transactional id or a consumer group, as FindCoordinator answers. The
// network fault harness (netcluster.sh) cuts that broker, so a test can
// take the coordinator of an application away rather than a random node.
//
//	findcoord -brokers 10.77.0.11:9092,10.77.0.13:9094 txn orders:1
//	findcoord -brokers ... group orders
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap list, comma separated")
	timeout := flag.Duration("timeout", 30*time.Second, "how long to try")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: findcoord -brokers LIST txn|group KEY")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *brokers == "" || flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	id, err := find(*brokers, flag.Arg(0), flag.Arg(1), *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "findcoord:", err)
		os.Exit(1)
	}
	fmt.Println(id)
}

// find asks until a broker answers without error: right after a broker
// was cut or resumed, the coordinator can be briefly unknown.
func find(brokers, kind, key string, timeout time.Duration) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		var rs kadm.FindCoordinatorResponses
		switch kind {
		case "txn":
			rs = adm.FindTxnCoordinators(ctx, key)
		case "group":
			rs = adm.FindGroupCoordinators(ctx, key)
		default:
			return 0, fmt.Errorf("unknown coordinator kind %q: want txn or group", kind)
		}
		r, ok := rs[key]
		switch {
		case !ok:
			err = errors.New("no answer for the key")
		case r.Err != nil:
			err = r.Err
		default:
			return r.NodeID, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s coordinator of %q: %w", kind, key, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
