package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is an amount of memory in bytes; a type of its own so that YAML
// and EOS_* variables accept sizes such as 128MiB, 512MB or 1GiB.
type ByteSize int64

// Units of ByteSize, binary (as Kubernetes' Mi) and decimal (as its M).
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

// sizeUnits maps a lower-cased unit to its bytes: B; KB, MB, GB, TB (and
// K, M, G, T) are powers of 1000; KiB, MiB, GiB, TiB (and Ki, Mi, Gi, Ti)
// of 1024.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": float64(KiB), "kib": float64(KiB), "mi": float64(MiB), "mib": float64(MiB),
	"gi": float64(GiB), "gib": float64(GiB), "ti": float64(TiB), "tib": float64(TiB),
}

// ParseByteSize reads a size as max_memory takes it: a number of bytes, or
// a number with a unit, e.g. 134217728, 128MiB, 128Mi, 1.5GiB or 200MB.
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("size %q: not a number of bytes with an optional unit such as MiB", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(f*mult, 0) || f*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: not a number of bytes with an optional unit such as MiB", s)
	}
	return ByteSize(math.Round(f * mult)), nil
}

// String writes the size in the largest unit that divides it, binary
// first: 128MiB, 200MB, 1000B; so a printed Config reads back unchanged.
func (b ByteSize) String() string {
	if b == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		n    ByteSize
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if b%u.n == 0 {
			return strconv.FormatInt(int64(b/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// UnmarshalText reads what ParseByteSize reads, so that the YAML key and
// the variable take the same forms; Validate checks the range.
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText writes the form UnmarshalText reads, so a Config written out
// as YAML or JSON loads back unchanged.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// Memory defaults and limits.
const (
	// DefaultMaxMemory is max_memory per worker unless set: enough for a
	// stateless pipeline at full speed, whatever its record size, with
	// the process's peak resident memory near 150 MB.
	DefaultMaxMemory = 128 * MiB
	// MinMaxMemory is the least max_memory per worker: an eighth of it
	// buffers the producer, which must hold the largest record a broker
	// accepts by default (message.max.bytes, 1 MiB), with room to spare.
	MinMaxMemory = 16 * MiB
	// maxMessageBytes is the broker default message.max.bytes.
	maxMessageBytes = 1048588
)

// memoryErrors checks max_memory.
func (c Config) memoryErrors() []error {
	if c.MaxMemory == 0 {
		return nil
	}
	n := ByteSize(c.workerCount())
	switch {
	case c.MaxMemory < 0:
		return []error{&FieldError{Field: "max_memory", Value: strconv.FormatInt(int64(c.MaxMemory), 10),
			Problem: fmt.Sprintf("must not be negative; use a size such as %s, or leave it unset for %s per worker", DefaultMaxMemory, DefaultMaxMemory)}}
	case c.MaxMemory/n < MinMaxMemory:
		per := ""
		if n > 1 {
			per = fmt.Sprintf(" (workers: %d, so at least %s)", n, MinMaxMemory*n)
		}
		return []error{&FieldError{Field: "max_memory", Value: c.MaxMemory.String(),
			Problem: fmt.Sprintf("must be at least %s per worker%s: an eighth of each worker's share buffers its producer, which must hold the largest record a broker accepts by default (message.max.bytes, %d bytes); raise it, e.g. to the default %s per worker, or lower workers",
				MinMaxMemory, per, maxMessageBytes, DefaultMaxMemory)}}
	}
	return nil
}
