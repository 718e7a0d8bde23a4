package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/topology"
)

// CPURounds is how many times the cpu pipeline's transform hashes each
// record with SHA-256 by default: the number that sets its cost.
// Calibrated so that Crunch, JSON decode and encode included, takes about
// 50 µs a record on the 2-core machines the figures of docs/benchmarks.md
// come from (BenchmarkCrunch: 47–51 µs with the CPU's SHA extensions;
// slower without them). Options.CPURounds changes it; the Kafka Streams app is
// passed the same number (--rounds).
const CPURounds = 550

// cpuCheckEvery is how often the output reader recomputes an output of
// the cpu pipeline to check its digest: every so many ids, so that the
// check costs the reader, which shares the machine with the process under
// test, well under 1 µs a record.
const cpuCheckEvery = 1024

// CPURecord is a value of the cpu pipeline, as JSON. Inputs carry ID, Sent
// (latency-phase records) and Pad, filling the value to the record size;
// outputs carry ID, Sent and Digest. The field order is the encoding's, so
// that the output reader finds id and t at the start of every value.
type CPURecord struct {
	ID     int64  `json:"id"`
	Sent   int64  `json:"t"`                // unix nanoseconds of the input's produce call; 0: none
	Pad    string `json:"pad,omitempty"`    // input only
	Digest string `json:"digest,omitempty"` // output only: hex of Digest(ID, Pad)
}

// Digest is the cpu pipeline's computation: SHA-256 of the record's id and
// pad, then rounds-1 more rounds of SHA-256 over the previous digest.
// It depends on nothing but its arguments, so any output can be checked.
func Digest(id int64, pad string, rounds int) [sha256.Size]byte {
	b := strconv.AppendInt(make([]byte, 0, 20+1+len(pad)), id, 10)
	b = append(b, ':')
	b = append(b, pad...)
	d := sha256.Sum256(b)
	for range rounds - 1 {
		d = sha256.Sum256(d[:])
	}
	return d
}

// errNotCPURecord says that a value of the cpu pipeline's input is not a
// CPURecord, so that the pipeline stops (error policy fail) instead of
// passing it on.
var errNotCPURecord = errors.New("bench: value is not a cpu pipeline record (JSON with id and pad); seed the input with eosctl bench --pipeline cpu")

// Crunch is the cpu pipeline's transform, the same in every case: decode
// the value as a CPURecord, compute Digest over its id and pad in rounds
// rounds, and encode the id, send time and hex digest as JSON. At
// CPURounds it costs about 50 µs a record, so that a pipeline running it
// is bound by CPU, not by Kafka. It is safe for concurrent use.
func Crunch(v []byte, rounds int) ([]byte, error) {
	var in CPURecord
	if err := json.Unmarshal(v, &in); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotCPURecord, err)
	}
	d := Digest(in.ID, in.Pad, rounds)
	return json.Marshal(CPURecord{ID: in.ID, Sent: in.Sent, Digest: hex.EncodeToString(d[:])})
}

// CPUTopology is the framework side of the cpu benchmark: input →
// MapValues(Crunch in rounds rounds) → output, bytes in and out.
func CPUTopology(input, output string, rounds int) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, input, codec.Bytes(), topology.Named("in"))
	c := topology.MapValues(in, "crunch", func(_ context.Context, v []byte) ([]byte, error) { return Crunch(v, rounds) })
	topology.To(c, output, codec.Bytes(), topology.Named("out"))
	return top
}

// cpuValue is input record id of the cpu pipeline: a CPURecord as JSON
// whose pad of 'x' fills it to size bytes (at least the JSON without pad).
func cpuValue(id int, sent time.Time, size int) []byte {
	r := CPURecord{ID: int64(id)}
	if !sent.IsZero() {
		r.Sent = sent.UnixNano()
	}
	b, _ := json.Marshal(r) // {"id":N,"t":T}
	if fill := size - len(b) - len(`,"pad":""`); fill > 0 {
		pad := make([]byte, fill)
		for i := range pad {
			pad[i] = 'x'
		}
		r.Pad = string(pad)
		b, _ = json.Marshal(r)
	}
	return b
}

// parseCPUValue reads id and send time from the start of a cpu pipeline
// value, input or output, as encoding/json writes CPURecord:
// {"id":N,"t":T,...}. It leaves the rest unread, so that the output
// reader stays cheap.
func parseCPUValue(v []byte) (id int, sent int64, ok bool) {
	const pre, mid = `{"id":`, `,"t":`
	if len(v) < len(pre) || string(v[:len(pre)]) != pre {
		return 0, 0, false
	}
	n, rest, ok := digits(v[len(pre):])
	if !ok || len(rest) < len(mid) || string(rest[:len(mid)]) != mid {
		return 0, 0, false
	}
	t, _, ok := digits(rest[len(mid):])
	if !ok {
		return 0, 0, false
	}
	return int(n), t, true
}

// checkCPUOutput says whether v is Crunch's output for input record id of
// a run with values of size bytes and rounds rounds.
func checkCPUOutput(id int, v []byte, size, rounds int) bool {
	var out CPURecord
	if json.Unmarshal(v, &out) != nil || out.ID != int64(id) {
		return false
	}
	var sent time.Time
	if out.Sent != 0 {
		sent = time.Unix(0, out.Sent)
	}
	var in CPURecord
	if json.Unmarshal(cpuValue(id, sent, size), &in) != nil {
		return false
	}
	d := Digest(in.ID, in.Pad, rounds)
	return out.Digest == hex.EncodeToString(d[:])
}
