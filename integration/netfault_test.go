package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cutTimeout is how long a client waits on a broker it should not reach:
// a healthy broker on this bridge answers in milliseconds.
const cutTimeout = 3 * time.Second

// netCluster is the cluster of integration/kafka/netcluster.sh: each broker
// in a network namespace of its own, so a test can cut links and pause
// processes and then check that the fault happened.
type netCluster struct {
	cmd   string
	addrs []string // addrs[i] is the address of node i+1
	env   *kafkatest.Env
}

// netEnv is the harness named by EOS_KAFKA_NETCLUSTER_CMD, or a skip.
// Every test leaves the cluster healed, resumed and whole.
func netEnv(t *testing.T) *netCluster {
	cmd := os.Getenv("EOS_KAFKA_NETCLUSTER_CMD")
	if cmd == "" {
		t.Skip("EOS_KAFKA_NETCLUSTER_CMD is not set; as root, start the cluster with " +
			"`EOS_KAFKA_PORT=29800 integration/kafka/netcluster.sh start` and set it to " +
			"`EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh`")
	}
	n := &netCluster{cmd: cmd}
	n.addrs = strings.Split(n.run(t, "bootstrap"), ",")
	n.env = &kafkatest.Env{Brokers: n.addrs}
	v := brokerVersion(n.env)
	if v == "" {
		t.Fatalf("no Kafka answers at %s (from %s bootstrap)", strings.Join(n.addrs, ","), cmd)
	}
	t.Logf("running against Apache Kafka %s at %s", v, strings.Join(n.addrs, ","))
	n.waitWhole(t)
	t.Cleanup(func() {
		n.run(t, "heal")
		n.run(t, "resume")
		n.waitWhole(t)
	})
	return n
}

// run runs the harness with args and returns its stdout, failing t with
// its stderr if it fails.
func (n *netCluster) run(t testing.TB, args ...string) string {
	t.Helper()
	begin := time.Now()
	c := exec.Command("bash", "-c", n.cmd+` "$@"`, "netcluster")
	c.Args = append(c.Args, args...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("netcluster.sh %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	t.Logf("netcluster.sh %s took %s", strings.Join(args, " "), time.Since(begin).Round(time.Millisecond))
	return strings.TrimSpace(string(out))
}

// addr is the address of node id.
func (n *netCluster) addr(id int32) string { return n.addrs[id-1] }

// others lists the node ids other than id.
func (n *netCluster) others(id int32) []int32 {
	var out []int32
	for i := range n.addrs {
		if int32(i+1) != id {
			out = append(out, int32(i+1))
		}
	}
	return out
}

// metadataFrom sends one Metadata request to addr and to no other broker,
// so a cut or paused broker shows as a timeout rather than being retried
// elsewhere.
func metadataFrom(addr string, timeout time.Duration, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(timeout))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// liveBrokers are the node ids addr lists: a fenced broker is left out.
func liveBrokers(resp *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// mustReach fails t unless node id answers a Metadata request in time.
func (n *netCluster) mustReach(t *testing.T, id int32) *kmsg.MetadataResponse {
	t.Helper()
	resp, err := metadataFrom(n.addr(id), 10*time.Second)
	if err != nil {
		t.Fatalf("node %d (%s) does not answer a client: %v", id, n.addr(id), err)
	}
	return resp
}

// mustNotReach fails t unless a Metadata request to node id times out.
func (n *netCluster) mustNotReach(t *testing.T, id int32) {
	t.Helper()
	begin := time.Now()
	_, err := metadataFrom(n.addr(id), cutTimeout)
	if err == nil {
		t.Fatalf("node %d (%s) answered a client; the fault did not cut it", id, n.addr(id))
	}
	if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("node %d (%s): want a timeout, got %v", id, n.addr(id), err)
	}
	t.Logf("node %d (%s) does not answer: %v after %s", id, n.addr(id), err, time.Since(begin).Round(time.Millisecond))
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// until polls cond every half second for up to d, failing t with what it
// waited for.
func until(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > d {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(begin)
}

// waitWhole waits until every node answers and lists every node as live,
// so one test's fault does not leak into the next.
func (n *netCluster) waitWhole(t *testing.T) {
	t.Helper()
	all := n.others(0)
	until(t, 120*time.Second, "every node to answer and list all nodes", func() bool {
		for _, id := range all {
			resp, err := metadataFrom(n.addr(id), cutTimeout)
			if err != nil || !slices.Equal(liveBrokers(resp), all) {
				return false
			}
		}
		return true
	})
}

// clientDial is a TCP connect from the clients' namespace (where pipeline
// workers run, via exec-client) to node id.
func (n *netCluster) clientDial(t *testing.T, id int32) error {
	t.Helper()
	host, port, _ := strings.Cut(n.addr(id), ":")
	line := fmt.Sprintf("%s exec-client timeout %d bash -c 'exec 3<>/dev/tcp/%s/%s'", n.cmd, int(cutTimeout/time.Second), host, port)
	out, err := exec.Command("bash", "-c", line).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// statusOf is the harness's status line of node id.
func (n *netCluster) statusOf(t *testing.T, id int32) string {
	t.Helper()
	out, _ := exec.Command("bash", "-c", n.cmd+" status").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "node "+strconv.Itoa(int(id))+":") {
			return line
		}
	}
	t.Fatalf("no status line for node %d in:\n%s", id, out)
	return ""
}

// cut-clients drops the traffic between one broker and every client: a
// client times out on it, in the root namespace and in the workers'
// namespace, while the other brokers answer and still list it as live (its
// links to its peers stay up); heal gives it back.
func TestNetCutClients(t *testing.T) {
	n := netEnv(t)
	const cut = 2
	n.run(t, "cut-clients", "2")
	if st := n.statusOf(t, cut); !strings.Contains(st, "cut-from-clients") {
		t.Fatalf("status does not show the cut: %s", st)
	}
	n.mustNotReach(t, cut)
	if err := n.clientDial(t, cut); err == nil {
		t.Fatalf("a worker in the clients' namespace connected to node %d", cut)
	}
	for _, id := range n.others(cut) {
		n.mustReach(t, id)
		if err := n.clientDial(t, id); err != nil {
			t.Fatalf("a worker in the clients' namespace cannot connect to node %d: %v", id, err)
		}
	}
	// Past broker.session.timeout.ms (9 s): a broker cut from its peers
	// would be fenced by now.
	time.Sleep(10 * time.Second)
	for _, id := range n.others(cut) {
		if live := liveBrokers(n.mustReach(t, id)); !slices.Contains(live, cut) {
			t.Fatalf("node %d lists live brokers %v: cutting the clients cut the peers too", id, live)
		}
	}
	n.mustNotReach(t, cut)
	n.run(t, "heal", "2")
	d := until(t, 30*time.Second, "node 2 to answer after heal", func() bool {
		_, err := metadataFrom(n.addr(cut), cutTimeout)
		return err == nil
	})
	t.Logf("node %d answers %s after heal", cut, d.Round(time.Millisecond))
}

// isolate takes a broker's link down: nobody reaches it, and heal brings
// the link back up.
func TestNetIsolate(t *testing.T) {
	n := netEnv(t)
	const cut = 3
	n.run(t, "isolate", "3")
	if st := n.statusOf(t, cut); !strings.Contains(st, "isolated") {
		t.Fatalf("status does not show the link down: %s", st)
	}
	n.mustNotReach(t, cut)
	for _, id := range n.others(cut) {
		n.mustReach(t, id)
	}
	n.run(t, "heal", "3")
	until(t, 30*time.Second, "node 3 to answer after heal", func() bool {
		_, err := metadataFrom(n.addr(cut), cutTimeout)
		return err == nil
	})
}

// isrOf is the ISR of every partition of topic as node id reports it.
func (n *netCluster) isrOf(id int32, topic string) ([][]int32, error) {
	resp, err := metadataFrom(n.addr(id), cutTimeout, topic)
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		return nil, fmt.Errorf("no partitions of %s in the metadata of node %d", topic, id)
	}
	var out [][]int32
	for _, p := range resp.Topics[0].Partitions {
		out = append(out, p.ISR)
	}
	return out, nil
}

// cut-peers drops the traffic between one broker and the others: the
// controller fences it and it leaves the ISR of every partition, while
// clients still reach it; acks=all writes go on with min.insync.replicas
// 2; after heal it catches up and rejoins every ISR.
func TestNetCutPeers(t *testing.T) {
	n := netEnv(t)
	const cut = 2
	topic := n.env.Name("netpeers")
	n.env.CreateTopics(t, 3, topic)
	full := func(id int32) bool {
		isrs, err := n.isrOf(id, topic)
		return err == nil && !slices.ContainsFunc(isrs, func(isr []int32) bool { return len(isr) != 3 })
	}
	until(t, 30*time.Second, "a full ISR", func() bool { return full(1) })
	n.run(t, "cut-peers", "2")
	if st := n.statusOf(t, cut); !strings.Contains(st, "cut-from-peers") {
		t.Fatalf("status does not show the cut: %s", st)
	}
	n.mustReach(t, cut)
	out := func() bool {
		for _, id := range n.others(cut) {
			resp, err := metadataFrom(n.addr(id), cutTimeout)
			if err != nil || slices.Contains(liveBrokers(resp), cut) {
				return false
			}
			isrs, err := n.isrOf(id, topic)
			if err != nil || slices.ContainsFunc(isrs, func(isr []int32) bool { return slices.Contains(isr, cut) }) {
				return false
			}
		}
		return true
	}
	d := until(t, 60*time.Second, "node 2 to be fenced and out of every ISR", out)
	t.Logf("node %d fenced and out of every ISR %s after the cut", cut, d.Round(time.Millisecond))
	n.mustReach(t, cut)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr(1), n.addr(3)), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("acks=all with two of three replicas in sync: %v", err)
	}
	n.run(t, "heal", "2")
	d = until(t, 120*time.Second, "node 2 back in every ISR", func() bool { return full(1) && full(3) })
	t.Logf("node %d back in every ISR %s after heal", cut, d.Round(time.Millisecond))
}

// cut-coordinator cuts exactly the broker FindCoordinator names for the
// key, and only it; a transactional producer of that id then cannot start.
func TestNetCutCoordinator(t *testing.T) {
	n := netEnv(t)
	app := n.env.Name("netapp")
	for _, kind := range []string{"txn", "group"} {
		t.Run(kind, func(t *testing.T) {
			key := app
			if kind == "txn" {
				key = app + ":1"
			}
			want := n.findCoordinator(t, kind, key)
			got := n.run(t, "cut-coordinator", kind, key)
			if got != strconv.Itoa(int(want)) {
				t.Fatalf("cut-coordinator %s %s cut node %s; FindCoordinator names node %d", kind, key, got, want)
			}
			t.Logf("the %s coordinator of %s is node %d", kind, key, want)
			n.mustNotReach(t, want)
			for _, id := range n.others(want) {
				n.mustReach(t, id)
				if st := n.statusOf(t, id); !strings.Contains(st, "faults: none") {
					t.Fatalf("node %d is not the coordinator but has faults: %s", id, st)
				}
			}
			if kind == "txn" {
				begin := time.Now()
				if err := n.beginTxn(key, 8*time.Second); err == nil {
					t.Fatalf("transactional id %s produced with its coordinator cut", key)
				} else {
					t.Logf("transactional id %s with its coordinator cut: %v after %s", key, err, time.Since(begin).Round(time.Millisecond))
				}
			}
			n.run(t, "heal")
			n.waitWhole(t)
			if kind == "txn" {
				begin := time.Now()
				if err := n.beginTxn(key, 60*time.Second); err != nil {
					t.Fatalf("transactional id %s after heal: %v", key, err)
				}
				t.Logf("transactional id %s committed %s after heal", key, time.Since(begin).Round(time.Millisecond))
			}
		})
	}
}

// findCoordinator asks the healthy cluster which node coordinates key,
// again while the answer is retriable: a fresh cluster answers
// COORDINATOR_NOT_AVAILABLE until it has made __transaction_state or
// __consumer_offsets, and neither kadm nor the client retries that.
func (n *netCluster) findCoordinator(t *testing.T, kind, key string) int32 {
	t.Helper()
	adm := kadm.NewClient(n.env.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		var rs kadm.FindCoordinatorResponses
		if kind == "txn" {
			rs = adm.FindTxnCoordinators(ctx, key)
		} else {
			rs = adm.FindGroupCoordinators(ctx, key)
		}
		r, ok := rs[key]
		if ok && r.Err == nil {
			return r.NodeID
		}
		var ke *kerr.Error
		if !ok || !errors.As(r.Err, &ke) || !ke.Retriable || ctx.Err() != nil {
			t.Fatalf("FindCoordinator %s %s: %v (answered: %v)", kind, key, r.Err, ok)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// beginTxn produces one record in a transaction with id and commits it:
// InitProducerID and EndTxn go to the id's coordinator.
func (n *netCluster) beginTxn(id string, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addrs...), kgo.TransactionalID(id),
		kgo.DefaultProduceTopic(id[:strings.IndexByte(id, ':')]), kgo.AllowAutoTopicCreation(),
		kgo.DialTimeout(cutTimeout), kgo.RequestTimeoutOverhead(cutTimeout), kgo.RetryTimeout(timeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// pause stops a broker's process (SIGSTOP, a stand-in for a GC pause): the
// kernel reports it stopped and clients time out on it; resume brings it
// back.
func TestNetPause(t *testing.T) {
	n := netEnv(t)
	const paused = 2
	pid := n.run(t, "pid", "2")
	n.run(t, "pause", "2")
	if st := procState(t, pid); st != "T" {
		t.Fatalf("broker pid %s is in state %q after pause, want T (stopped)", pid, st)
	}
	n.mustNotReach(t, paused)
	for _, id := range n.others(paused) {
		n.mustReach(t, id)
	}
	n.run(t, "resume", "2")
	if st := procState(t, pid); st == "T" {
		t.Fatalf("broker pid %s is still stopped after resume", pid)
	}
	d := until(t, 30*time.Second, "node 2 to answer after resume", func() bool {
		_, err := metadataFrom(n.addr(paused), cutTimeout)
		return err == nil
	})
	t.Logf("node %d answers %s after resume", paused, d.Round(time.Millisecond))
}

// procState is the state letter of pid in /proc/PID/stat (R, S, T, ...).
func procState(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		t.Fatalf("cannot parse /proc/%s/stat: %q", pid, s)
	}
	return s[i+2 : i+3]
}
