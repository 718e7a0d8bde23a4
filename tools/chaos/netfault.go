package chaos

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
)

// EnvNetClusterCmd names the network-namespace harness when --net-cmd
// does not, as the integration tests name it.
const EnvNetClusterCmd = "EOS_KAFKA_NETCLUSTER_CMD"

// ErrNoNetCluster refuses network faults without the harness that makes
// them: integration/kafka/netcluster.sh runs each broker in a network
// namespace of its own, so that a link can be cut and healed, and the
// verifier must be pointed at it and at its cluster.
var ErrNoNetCluster = errors.New("--net-cuts, --pauses and --coordinator-cuts need the network-namespace harness " +
	"integration/kafka/netcluster.sh running the cluster under test: as root, start it with " +
	"`EOS_KAFKA_PORT=29800 integration/kafka/netcluster.sh start`, then run " +
	"`eosctl verify --brokers $(EOS_KAFKA_PORT=29800 integration/kafka/netcluster.sh bootstrap) " +
	"--net-cmd \"EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh\" --net-cuts 3 --pauses 3` (" +
	EnvNetClusterCmd + " may stand for --net-cmd, EOS_BROKERS for --brokers)")

// Defaults of the network faults' hold times (see Options.CutFor and
// Options.PauseFor).
const (
	defaultCutFor   = 12 * time.Second
	pauseBeyond     = 5 * time.Second
	netCommandLimit = 2 * time.Minute
)

// NetDefaults fills in the hold times, once SessionTimeout has its
// default: a pause outlasts the session and the workers' transaction
// timeout (Base's, or config's default).
func (o *Options) NetDefaults() {
	if o.CutFor == 0 {
		o.CutFor = defaultCutFor
	}
	if o.PauseFor == 0 {
		o.PauseFor = max(o.SessionTimeout, cmp.Or(o.Base.TransactionTimeout, config.DefaultTransactionTimeout)) + pauseBeyond
	}
}

// counts is how many faults of each kind the options plan.
func (o Options) counts() faultCounts {
	return faultCounts{kills: o.Kills, terms: o.Terms, brokerRestarts: o.BrokerRestarts, rebalances: o.Rebalances,
		netCuts: o.NetCuts, pauses: o.Pauses, coordinatorCuts: o.CoordinatorCuts}
}

// held is how long the planned network faults hold in all.
func (o Options) held() time.Duration {
	return time.Duration(o.NetCuts+o.CoordinatorCuts)*o.CutFor + time.Duration(o.Pauses)*o.PauseFor
}

// NetHarness runs integration/kafka/netcluster.sh for the cluster under
// test: the verifier's network faults, and those of verify --sink.
type NetHarness struct {
	cmd   string    // the command line; bash appends the arguments
	dir   string    // where it runs; "" is the current directory
	log   io.Writer // its stderr: the broker log
	nodes int       // brokers in the cluster, numbered from 1
}

// run runs the harness with args, at most netCommandLimit, and returns
// its stdout, trimmed, whether it failed or not.
func (h *NetHarness) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, netCommandLimit)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", h.cmd+` "$@"`, "netcluster")
	c.Args = append(c.Args, args...)
	c.Dir, c.Env, c.Stderr = h.dir, os.Environ(), h.log
	// At the limit, kill bash and whatever it started, and stop waiting
	// for pipes a straggler still holds, so that the heal after a fault
	// always gets its turn.
	ownGroup(c)
	c.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	c.Stdout = &out
	err := c.Run()
	if err != nil {
		err = fmt.Errorf("chaos: %s %s: %w; its output is in the broker log", h.cmd, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out.String()), err
}

// status is the harness's status line of node and the faults it lists
// there ("none" for none).
func (h *NetHarness) status(ctx context.Context, node int) (line, faults string, err error) {
	out, err := h.run(ctx, "status") // exits 1 when a broker is down, and still prints every line
	prefix := "node " + strconv.Itoa(node) + ":"
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			_, faults, _ := strings.Cut(l, "faults: ")
			return l, faults, nil
		}
	}
	return "", "", fmt.Errorf("chaos: no status line for node %d from the harness (%v): %q", node, err, out)
}

// openNetHarness opens the harness of o's cluster.
func openNetHarness(ctx context.Context, o Options, log io.Writer) (*NetHarness, error) {
	return OpenNetHarness(ctx, o.NetClusterCmd, o.BrokerRestartDir, o.Brokers, log)
}

// OpenNetHarness checks that the harness command cmd, run in dir, runs
// the cluster of brokers, every broker up and none cut or paused, and
// counts the brokers. The harness writes its stderr to log.
func OpenNetHarness(ctx context.Context, cmd, dir string, brokers []string, log io.Writer) (*NetHarness, error) {
	h := &NetHarness{cmd: cmd, dir: dir, log: log}
	out, err := h.run(ctx, "bootstrap")
	if err != nil || out == "" {
		return nil, fmt.Errorf("chaos: --net-cmd %q does not answer bootstrap (%v); is the harness started (`netcluster.sh start`, as root)?", h.cmd, err)
	}
	addrs := strings.Split(out, ",")
	if !slices.ContainsFunc(addrs, func(a string) bool { return slices.Contains(brokers, a) }) {
		return nil, fmt.Errorf("chaos: --brokers %s is not the cluster of --net-cmd, whose brokers are %s; pass --brokers %s",
			strings.Join(brokers, ","), out, out)
	}
	h.nodes = len(addrs)
	for node := 1; node <= h.nodes; node++ {
		line, faults, err := h.status(ctx, node)
		if err != nil {
			return nil, err
		}
		if faults != "none" || !strings.Contains(line, ": running") {
			return nil, fmt.Errorf("chaos: the harness reports %q before the run; heal and resume it (`netcluster.sh heal`, `netcluster.sh resume`) first", line)
		}
	}
	return h, nil
}

// Nodes is how many brokers the cluster has, numbered from 1.
func (h *NetHarness) Nodes() int { return h.nodes }

// WholeAgain heals every cut and resumes every paused broker, whatever a
// fault left behind.
func (h *NetHarness) WholeAgain() error {
	ctx, cancel := context.WithTimeout(context.Background(), netCommandLimit)
	defer cancel()
	_, err := h.run(ctx, "heal")
	_, err2 := h.run(ctx, "resume")
	return errors.Join(err, err2)
}
