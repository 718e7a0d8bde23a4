package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// RestartLatency is how long workers restarted after a SIGKILL took from
// their process start to their first committed batch: how soon a crashed
// instance that comes straight back works again. With static membership
// (KIP-345) the group hands it its partitions back at once; without it
// the group first waits out the dead member's session timeout.
type RestartLatency struct {
	// Restarts counts the worker processes started after a SIGKILL.
	Restarts int
	// Count is how many of them committed a batch: the samples. The rest
	// were killed again, stopped, or found no work before they did.
	Count int
	// Median and Max summarise the samples.
	Median, Max time.Duration
	// Samples are the measured times, in the order the workers ended.
	Samples []time.Duration
	// Unfinished are the restarts that never committed: how long each
	// ran before the verifier killed or stopped it, or before it stopped
	// on an injected error, mid-run. A restart killed again after 10s
	// without a commit took at least 10s, so MaxUnfinished bounds the
	// latency as much as Max does.
	Unfinished    []time.Duration
	MaxUnfinished time.Duration
	// InOutage counts the restarts whose wait overlapped an injected
	// broker restart: no instance commits while the broker is down, so
	// they are left out of Samples and Unfinished.
	InOutage int
}

// newRestartLatency summarises samples out of restarts.
func newRestartLatency(restarts int, samples []time.Duration) RestartLatency {
	l := RestartLatency{Restarts: restarts, Count: len(samples), Samples: slices.Clone(samples)}
	if len(samples) == 0 {
		return l
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	mid := len(sorted) / 2
	l.Median = sorted[mid]
	if len(sorted)%2 == 0 {
		l.Median = (sorted[mid-1] + sorted[mid]) / 2
	}
	l.Max = sorted[len(sorted)-1]
	return l
}

// String is the summary on one line, for the result table.
func (l RestartLatency) String() string {
	if l.Restarts == 0 {
		return "no restart after a kill"
	}
	if l.Count == 0 {
		return fmt.Sprintf("none of %d restarts after a kill committed a batch", l.Restarts)
	}
	out := fmt.Sprintf("median %s, max %s (%d of %d restarts after a kill committed)",
		l.Median.Round(time.Millisecond), l.Max.Round(time.Millisecond), l.Count, l.Restarts)
	if len(l.Unfinished) > 0 {
		out += fmt.Sprintf("; %d ended without a commit, the longest after %s", len(l.Unfinished), l.MaxUnfinished.Round(time.Millisecond))
	}
	if l.InOutage > 0 {
		out += fmt.Sprintf("; %d waited through a broker restart, not counted", l.InOutage)
	}
	return out
}

// unfinished records a restart that ran for d without committing.
func (l *RestartLatency) unfinished(d time.Duration) {
	l.Unfinished = append(l.Unfinished, d)
	l.MaxUnfinished = max(l.MaxUnfinished, d)
}

// restartLatencyJSON is RestartLatency with durations in milliseconds.
type restartLatencyJSON struct {
	Restarts  int     `json:"restarts"`
	Count     int     `json:"count"`
	MedianMs  int64   `json:"median_ms"`
	MaxMs     int64   `json:"max_ms"`
	SamplesMs []int64 `json:"samples_ms,omitempty"`
	// UnfinishedMs: see RestartLatency.Unfinished.
	UnfinishedMs    []int64 `json:"unfinished_ms,omitempty"`
	MaxUnfinishedMs int64   `json:"max_unfinished_ms"`
	InOutage        int     `json:"in_outage"`
}

// MarshalJSON writes the durations as whole milliseconds (median_ms,
// max_ms, samples_ms), which scripts can compare without parsing Go
// durations.
func (l RestartLatency) MarshalJSON() ([]byte, error) {
	j := restartLatencyJSON{Restarts: l.Restarts, Count: l.Count, MedianMs: l.Median.Milliseconds(), MaxMs: l.Max.Milliseconds(),
		MaxUnfinishedMs: l.MaxUnfinished.Milliseconds(), InOutage: l.InOutage}
	for _, s := range l.Samples {
		j.SamplesMs = append(j.SamplesMs, s.Milliseconds())
	}
	for _, s := range l.Unfinished {
		j.UnfinishedMs = append(j.UnfinishedMs, s.Milliseconds())
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *RestartLatency) UnmarshalJSON(b []byte) error {
	var j restartLatencyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = RestartLatency{Restarts: j.Restarts, Count: j.Count,
		Median: time.Duration(j.MedianMs) * time.Millisecond, Max: time.Duration(j.MaxMs) * time.Millisecond}
	for _, ms := range j.SamplesMs {
		l.Samples = append(l.Samples, time.Duration(ms)*time.Millisecond)
	}
	for _, ms := range j.UnfinishedMs {
		l.unfinished(time.Duration(ms) * time.Millisecond)
	}
	l.InOutage = j.InOutage
	return nil
}
