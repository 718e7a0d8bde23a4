package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kgo"
)

// judge reads the output once the workers have stopped and sets the
// run's verdict: the pipeline's own, the aborted records, the dedup
// pipeline's effects, and the problems that decide Pass.
func (r *run) judge(ctx context.Context) error {
	res := &r.res
	// Each read below is bounded; this bounds them all, traces included.
	dctx, cancel := context.WithTimeout(ctx, 4*r.o.DrainTimeout)
	defer cancel()
	out, err := finalRead(dctx, r.o, r.base, res.Output, res.LiveRead, r.event)
	if err != nil {
		return err
	}
	if err := r.judgeOutput(dctx, out); err != nil {
		return err
	}
	if r.o.Guarantee == config.ExactlyOnce {
		all, err := verdict.DrainAll(dctx, r.base, res.Output, len(out), time.Second)
		if err == nil && dctx.Err() == nil {
			res.AbortedRecords = len(all) - len(out)
		}
	}
	if v := res.DedupVerdict; v != nil {
		v.EffectsBound = res.WorkerKills
		if err := judgeEffects(dctx, r.rdb, v, r.o.Records); err != nil {
			return err
		}
		r.event("effects verdict: %s", v)
	}
	res.Seconds = time.Since(r.began).Seconds()
	res.Failed, res.Problems = problems(*res, int(r.live.unknown.Load()))
	res.Pass = len(res.Problems) == 0
	r.reportVerdict()
	return nil
}

// judgeOutput judges out, the committed output, as the pipeline asks:
// key by key with the changelog for the counting pipeline, by the seed
// for the event-time ones, record by record otherwise.
func (r *run) judgeOutput(ctx context.Context, out []*kgo.Record) error {
	o, res := r.o, &r.res
	switch {
	case r.counting:
		changelog, err := finalRead(ctx, o, r.base, res.Changelog, min(o.Records, o.Keys), r.event)
		if err != nil {
			return err
		}
		var c verdict.Counts
		res.Verdict, c = verdict.JudgeCounts(o.Records, o.Keys, out, changelog)
		if c.CountGaps > 0 || c.CountRepeats > 0 {
			c.Examples = traceCounts(ctx, r.base, res.Output, res.Changelog, out, changelog)
		}
		res.Counts = &c
	case r.ev != nil:
		res.Verdict = verdict.Verdict{RecordsIn: o.Records, RecordsOut: len(out)}
		r.ev.judge(out, res)
	default:
		res.Verdict = verdict.Judge(o.Records, out)
	}
	return nil
}

// reportVerdict reports the verdicts through Options.Events.
func (r *run) reportVerdict() {
	res := &r.res
	r.event("verdict: %s", res.Verdict)
	if res.Counts != nil {
		r.event("count verdict: %s", res.Counts)
		for _, e := range res.Counts.Examples {
			r.event("count example: %s", e)
		}
	}
	if res.WindowVerdict != nil {
		r.event("window verdict: %s %v", res.WindowVerdict, res.WindowVerdict.WindowExamples)
	}
	if res.JoinVerdict != nil {
		r.event("join verdict: %s %v", res.JoinVerdict, res.JoinVerdict.PairExamples)
	}
	if res.LonelyVerdict != nil {
		r.event("lonely verdict: %s %v", res.LonelyVerdict, res.LonelyVerdict.LonelyExamples)
	}
	if res.GlobalVerdict != nil {
		r.event("global join verdict: %s %v", res.GlobalVerdict, res.GlobalVerdict.GlobalExamples)
	}
}

// maxExamples is how many differences a verdict names, for the logs.
const maxExamples = 5

// addExample appends one difference to list, up to maxExamples.
func addExample(list *[]string, format string, a ...any) {
	if len(*list) < maxExamples {
		*list = append(*list, fmt.Sprintf(format, a...))
	}
}

// addUnseen counts the names of want that seen never counted, what never
// came out, and names the first of them, sorted, in list (up to
// maxExamples), each by format with its name.
func addUnseen[V any](list *[]string, want map[string]V, seen map[string]int, format string) int {
	var out []string
	for id := range want {
		if seen[id] == 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	for _, id := range out[:min(len(out), maxExamples)] {
		addExample(list, format, id)
	}
	return len(out)
}
