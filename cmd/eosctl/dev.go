package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// newDevCmd groups local development helpers.
func newDevCmd(g *globals) *cobra.Command {
	return newGroupingCmd("dev", "Local development helpers", newDevBrokerCmd(g))
}

// defaultDevPartitions is the partition count of topics the dev broker
// creates on first use: more than one, so that keys and group members
// spread as they would on a real cluster.
const defaultDevPartitions = 3

// devBrokerHelp is the long help of `dev broker`.
const devBrokerHelp = `Run kfake, an in-process Kafka-compatible cluster, until SIGINT or SIGTERM.
It supports transactions (KIP-447, KIP-890), read_committed, consumer
groups and auto topic creation. With --data-dir its data survives restarts.
It is for development and tests only: no replication, no real durability
guarantees.

A topic created on first use (a client that allows auto creation produces
to, or asks for, a topic that does not exist) gets --partitions partitions,
3 unless set, so that keys and group members spread as on a real cluster;
so does a topic created with -1 partitions. 'eosctl topic create' chooses
per topic.

Prints one broker address per line; point pipelines at them with
EOS_BROKERS. Brokers beyond the first listen on the following ports.`

// devBrokerFlags are the flags of `dev broker`.
type devBrokerFlags struct {
	listen, dataDir   string
	partitions, count int
	configs           map[string]string
}

// kfakeOpts is the cluster the flags ask for, on host from port (0: free
// ports).
func (f devBrokerFlags) kfakeOpts(host string, port int) []kfake.Opt {
	opts := []kfake.Opt{
		kfake.NumBrokers(f.count),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(f.partitions), // kfake's own default is 10
		// kfake listens on 127.0.0.1; this swaps in --listen's host.
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
	}
	if port > 0 {
		ports := make([]int, f.count)
		for i := range ports {
			ports[i] = port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	if f.dataDir != "" {
		opts = append(opts, kfake.DataDir(f.dataDir))
	}
	if len(f.configs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(f.configs))
	}
	return opts
}

// newDevBrokerCmd runs kfake, franz-go's in-process Kafka, as a standalone
// broker: transactions, read_committed and groups work, with no JVM.
func newDevBrokerCmd(g *globals) *cobra.Command {
	var f devBrokerFlags
	c := &cobra.Command{
		Use:     "broker",
		Short:   "Run an in-process Kafka-compatible broker for local development",
		Long:    devBrokerHelp,
		Example: "  eosctl dev broker --data-dir ~/.eosflow/kfake\n  eosctl dev broker --listen 127.0.0.1:0 --brokers-count 3",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, port, err := parseListen(f.listen, f.count, f.partitions)
			if err != nil {
				return err
			}
			cluster, err := kfake.NewCluster(f.kfakeOpts(host, port)...)
			if err != nil {
				return fmt.Errorf("cannot start the broker on %s: %w — pick a free port with --listen (or port 0)", f.listen, err)
			}
			defer cluster.Close()

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			addrs := cluster.ListenAddrs()
			for _, a := range addrs {
				fmt.Fprintln(cmd.OutOrStdout(), a)
			}
			errw := cmd.ErrOrStderr()
			fmt.Fprintf(errw, "broker running; export EOS_BROKERS=%s; stop with Ctrl-C\n", strings.Join(addrs, ","))
			if f.dataDir == "" {
				fmt.Fprintln(errw, "data is in memory only: pass --data-dir to keep it across restarts")
			}
			<-ctx.Done()
			fmt.Fprintln(errw, "shutting down")
			cluster.Close() // saves the data dir before we report done
			if f.dataDir != "" {
				fmt.Fprintf(errw, "data kept in %s\n", f.dataDir)
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVar(&f.listen, "listen", defaultBroker, "host:port of the first broker (port 0 picks free ports)")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory to persist topics, offsets and transactions across restarts")
	fs.IntVar(&f.partitions, "partitions", defaultDevPartitions, "partitions of auto-created topics (and of topics created with -1)")
	fs.IntVar(&f.count, "brokers-count", 1, "number of brokers")
	fs.StringToStringVar(&f.configs, "broker-config", nil, "broker config key=value (repeatable), e.g. transaction.max.timeout.ms=60000")
	_ = c.MarkFlagDirname("data-dir")
	return c
}

// parseListen checks dev broker's --listen, --brokers-count and --partitions
// together, as usage errors: listen must be a concrete host and a port (0
// for random ones) with room for count consecutive ports. count is checked
// first, so a huge one cannot overflow the port arithmetic.
func parseListen(listen string, count, partitions int) (host string, port int, err error) {
	if count < 1 || partitions < 1 {
		return "", 0, usageErrorf("--brokers-count and --partitions must be at least 1")
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, usageErrorf("--listen %q: want host:port, e.g. 127.0.0.1:9092", listen)
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 || count > 65536-port {
		return "", 0, usageErrorf("--listen %q: port must be 0 (random) or a port with room for %d brokers", listen, count)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "", 0, usageErrorf("--listen %q: give a concrete host; the broker advertises the address it listens on, and clients cannot dial %q", listen, host)
	}
	return host, port, nil
}
