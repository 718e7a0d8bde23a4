package main

import (
	"fmt"

	"github.com/eosflow/eosflow/tools/chaos"
)

// The sinks of verify --sink that go into a side effect through a dedup
// store: the article's pattern, and its control with no store.
const (
	sinkRedisDedup     = "redis-dedup"
	sinkRedisDedupNone = "redis-dedup-none"
)

// isDedupSink reports whether --sink names the dedup-store pattern.
func isDedupSink(sink string) bool { return sink == sinkRedisDedup || sink == sinkRedisDedupNone }

// dedupFlags are the flags of verify --sink redis-dedup.
type dedupFlags struct {
	mode, url string
}

// dedupOptions turns verify --sink redis-dedup (or redis-dedup-none) into
// a run of chaos.PipelineDedup, with verify's workload and faults. A
// --dedup-mode without such a sink is refused, so it is never silently
// ignored.
func dedupOptions(o *chaos.Options, sink, pipeline string, d dedupFlags) error {
	if !isDedupSink(sink) {
		if pipeline == string(chaos.PipelineDedup) {
			return usageErrorf("--pipeline %s is run by --sink %s (with --redis-url and --dedup-mode)", pipeline, sinkRedisDedup)
		}
		if d.mode != "" {
			return usageErrorf("--dedup-mode %s needs --sink %s", d.mode, sinkRedisDedup)
		}
		return nil
	}
	if pipeline != "" && pipeline != string(chaos.PipelineUpper) {
		return usageErrorf("--sink %s runs its own pipeline (an effect behind a dedup store, then upper-cased to the output); drop --pipeline %s", sink, pipeline)
	}
	mode := chaos.DedupMode(d.mode)
	if sink == sinkRedisDedupNone {
		if mode != "" && mode != chaos.DedupNone {
			return usageErrorf("--sink %s is the control with no dedup store; drop --dedup-mode %s, or use --sink %s", sink, mode, sinkRedisDedup)
		}
		mode = chaos.DedupNone
	}
	if d.url == "" {
		return usageErrorf("--sink %s needs --redis-url (or %s): start a Redis with integration/redis/redis.sh start, then pass --redis-url $(integration/redis/redis.sh url)",
			sink, chaos.EnvRedisURL)
	}
	o.Pipeline, o.DedupMode, o.RedisURL = chaos.PipelineDedup, mode, d.url
	return nil
}

// dedupClaim is what a passing run of verify --sink redis-dedup showed.
func dedupClaim(r chaos.Result) string {
	v := r.DedupVerdict
	risk := fmt.Sprintf("no effect lost, %d repeated (at most %d: one per SIGKILL)", v.EffectsExtraRuns, v.EffectsBound)
	if v.DedupMode == chaos.DedupBefore {
		risk = fmt.Sprintf("no effect repeated, %d lost (at most %d: one per SIGKILL)", v.EffectsMissing, v.EffectsBound)
	}
	return fmt.Sprintf("mark %s: %s through %d kills and %d injected aborts; every record in the output exactly once, through %d faults",
		v.DedupMode, risk, r.WorkerKills, r.InjectedAborts, r.FaultsPlanned)
}

// addDedupRows adds the effects verdict to verify's table.
func addDedupRows(t *table, r chaos.Result) {
	v := r.DedupVerdict
	if v.DedupMode == chaos.DedupNone {
		t.add("dedup mode", fmt.Sprintf("none: the control, no Dedup node (effects in hash %s)", v.EffectsKey))
	} else {
		t.add("dedup mode", fmt.Sprintf("%s (store keys %s*, effects in hash %s)", v.DedupMode, v.DedupPrefix, v.EffectsKey))
	}
	t.add("effects run", v.EffectsRun)
	t.add("effects missing", fmt.Sprintf("%d (seeded ids whose effect never ran)", v.EffectsMissing))
	t.add("effects repeated", fmt.Sprintf("%d ids (%d extra runs)", v.EffectsRepeated, v.EffectsExtraRuns))
	allowed := "repeated runs allowed"
	if v.DedupMode == chaos.DedupBefore {
		allowed = "missing effects allowed"
	}
	t.add("effects bound", fmt.Sprintf("%d %s: one per SIGKILL", v.EffectsBound, allowed))
	for _, e := range v.Examples {
		t.add("effects example", e)
	}
}
