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
	return fmt.Sprintf("median %s, max %s (%d of %d restarts after a kill committed)",
		l.Median.Round(time.Millisecond), l.Max.Round(time.Millisecond), l.Count, l.Restarts)
}

// restartLatencyJSON is RestartLatency with durations in milliseconds.
type restartLatencyJSON struct {
	Restarts  int     `json:"restarts"`
	Count     int     `json:"count"`
	MedianMs  int64   `json:"median_ms"`
	MaxMs     int64   `json:"max_ms"`
	SamplesMs []int64 `json:"samples_ms,omitempty"`
}

// MarshalJSON writes the durations as whole milliseconds (median_ms,
// max_ms, samples_ms), which scripts can compare without parsing Go
// durations.
func (l RestartLatency) MarshalJSON() ([]byte, error) {
	j := restartLatencyJSON{Restarts: l.Restarts, Count: l.Count, MedianMs: l.Median.Milliseconds(), MaxMs: l.Max.Milliseconds()}
	for _, s := range l.Samples {
		j.SamplesMs = append(j.SamplesMs, s.Milliseconds())
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
	return nil
}
