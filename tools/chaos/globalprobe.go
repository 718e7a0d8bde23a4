package chaos

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The probe phase of PipelineGlobalJoin. Once the loop is over (no fault
// is due) the table writer stops and the verifier reads the table, so it
// knows each customer's last committed row. It then produces waves of
// late orders, probes: in every input partition one order of each
// customer whose row changed. A pipeline whose workers keep their table
// current joins every probe with its customer's last row, at the latest
// once the table's lag bound (Options.TableLag) has passed since that row
// became readable. A wave in which some probe joined an older row is
// followed by another, the pauses doubling, until one comes out current
// or one produced past the bound does not.
const (
	// probeFirstGap is the pause after the first stale wave; each later
	// pause doubles, up to the bound.
	probeFirstGap = time.Second
	// probeWait bounds the wait for one wave's probes to come out.
	probeWait = time.Minute
	// probePrefix starts every probe order's key; the seed's start "o".
	probePrefix = "p"
)

// probeWave is one wave of probe orders as produced: how long after the
// table's last update became readable, and its orders (key → customer).
type probeWave struct {
	lag    time.Duration
	orders map[string]string
}

// probeKey names the probe order of wave w in input partition p for
// customer c: "p<w>.<p>.<c>".
func probeKey(w int, p int32, c string) string {
	return probePrefix + strconv.Itoa(w) + "." + strconv.Itoa(int(p)) + "." + c
}

// probeCustomer is the customer a probe key names, and whether key is
// one.
func probeCustomer(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, probePrefix)
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return "", false
	}
	for _, n := range parts[:2] {
		if _, err := strconv.Atoi(n); err != nil {
			return "", false
		}
	}
	return parts[2], strings.HasPrefix(parts[2], "c")
}

// tableLagBound is how far a worker's global table may lag its topic
// while Run runs, as docs/state.md states it: max(connect_timeout, the
// stall bound), the stall bound being max(transaction_timeout + 10s,
// session_timeout, rebalance_timeout) + 10s, for the workers' settings
// (their rebalance_timeout is max(10s, 2 × session_timeout)). 30 s with
// the defaults.
func tableLagBound(base config.Config, session time.Duration) time.Duration {
	txn := cmp.Or(base.TransactionTimeout, config.DefaultTransactionTimeout)
	connect := cmp.Or(base.ConnectTimeout, config.DefaultConnectTimeout)
	stall := max(txn+10*time.Second, session, max(10*time.Second, 2*session)) + 10*time.Second
	return max(connect, stall)
}

// probe runs the probe phase: it stops the writer, reads the table, then
// produces waves of probes into in and reads them back from out, until a
// wave comes out current, one produced past the lag bound does not, or
// ctx ends. What it produced is in g.waves for judge; why it produced
// nothing in g.probeNote.
func (g *globalRun) probe(ctx context.Context, in, out string) {
	g.w.stop()
	g.readTableOnce(ctx)
	if g.readErr != nil {
		g.probeNote = fmt.Sprintf("reading the table failed: %v", g.readErr)
		return
	}
	updated := g.updatedCustomers()
	if len(updated) == 0 {
		g.probeNote = "no customer's row changed"
		return
	}
	g.event("probing the workers' global tables: %d customers' rows changed; late orders must join their last rows within %s of the table's last update becoming readable",
		len(updated), g.lagBound)
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), g.base...), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		g.probeNote = err.Error()
		return
	}
	defer cl.Close()
	rd, err := newProbeReader(g.base, out)
	if err != nil {
		g.probeNote = err.Error()
		return
	}
	defer rd.close()
	for w := 0; ctx.Err() == nil; w++ {
		wave, err := g.produceWave(ctx, cl, in, w, updated)
		if err != nil {
			g.probeNote = fmt.Sprintf("producing probe wave %d: %v", w, err)
			return
		}
		if !g.awaitWave(ctx, rd, w, wave) || wave.lag >= g.lagBound {
			return
		}
		next := min(g.lagBound, max(2*wave.lag, wave.lag+probeFirstGap))
		sleepCtx(ctx, time.Until(g.readAt.Add(next)))
	}
}

// awaitWave reads wave w's probes back and reports whether another wave
// should follow: all came out, and some joined an older row.
func (g *globalRun) awaitWave(ctx context.Context, rd *probeReader, w int, wave probeWave) bool {
	rows := rd.await(ctx, wave.orders, probeWait)
	stale := 0
	for o, row := range rows {
		if row != g.read.last[wave.orders[o]] {
			stale++
		}
	}
	g.event("probe wave %d, produced %.1fs after the table's last update became readable: %d of %d orders came out, %d of them joined an older row than their customer's last",
		w, wave.lag.Seconds(), len(rows), len(wave.orders), stale)
	return len(rows) == len(wave.orders) && stale > 0
}

// updatedCustomers are the customers whose last committed row is not
// their seeded one, sorted.
func (g *globalRun) updatedCustomers() []string {
	var out []string
	for c, row := range g.read.last {
		if g.kind[c] == customerChanging && row != globalInitial {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// produceWave produces wave w: in every partition of in one order of
// each of customers, and records it in g.waves and g.probes.
func (g *globalRun) produceWave(ctx context.Context, cl *kgo.Client, in string, w int, customers []string) (probeWave, error) {
	wave := probeWave{lag: time.Since(g.readAt), orders: map[string]string{}}
	var recs []*kgo.Record
	for p := range g.partitions {
		for _, c := range customers {
			k := probeKey(w, p, c)
			wave.orders[k] = c
			recs = append(recs, &kgo.Record{Topic: in, Partition: p, Key: []byte(k), Value: []byte(c)})
		}
	}
	// Recorded before the produce: records of a failed produce may
	// still have reached the input.
	g.waves = append(g.waves, wave)
	for k, c := range wave.orders {
		g.probes[k] = c
	}
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	return wave, kafkautil.ProduceAll(pctx, cl, len(recs), func(i int) *kgo.Record { return recs[i] })
}

// probeReader reads the output read_committed for the probes' rows.
type probeReader struct {
	cl   *kgo.Client
	rows map[string]string // probe order → the row its first record joined
}

func newProbeReader(base []kgo.Opt, topic string) (*probeReader, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, err
	}
	return &probeReader{cl: cl, rows: map[string]string{}}, nil
}

func (rd *probeReader) close() { rd.cl.Close() }

// await reads until every order of want came out, or for at most bound,
// and returns the rows of those that did.
func (rd *probeReader) await(ctx context.Context, want map[string]string, bound time.Duration) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	got := map[string]string{}
	for {
		for o := range want {
			if row, ok := rd.rows[o]; ok {
				got[o] = row
			}
		}
		if len(got) == len(want) || ctx.Err() != nil {
			return got
		}
		rd.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if _, ok := probeCustomer(string(r.Key)); !ok {
				return
			}
			if _, seen := rd.rows[string(r.Key)]; !seen {
				_, row, _ := strings.Cut(string(r.Value), "=")
				rd.rows[string(r.Key)] = row
			}
		})
	}
}
