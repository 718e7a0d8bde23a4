package dedupsize

import "math"

// MeasuredTolerance is how far, as a fraction, a server's measured size may
// be from ForStore's estimate before CheckMeasured fails.
const MeasuredTolerance = 0.25

// TB is what CheckMeasured needs of a *testing.T: an interface, so that
// eosctl, which links this package, does not link package testing.
type TB interface {
	Helper()
	Fatal(args ...any)
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// CheckMeasured fails t when measured, the bytes n ids of idBytes bytes
// took in store kind on a real server, is more than MeasuredTolerance off
// ForStore's estimate: the store tests of redisdedup and pgdedup keep the
// measured overheads above true with it.
func CheckMeasured(t TB, kind string, n, idBytes int, measured float64) {
	t.Helper()
	want, err := ForStore(kind, float64(n), idBytes)
	if err != nil {
		t.Fatal(err)
	}
	ratio := measured / want.Bytes
	t.Logf("%s: %.0f B/entry measured, %.0f estimated (%.2f×)", kind, measured/float64(n), want.BytesPerEntry, ratio)
	if math.Abs(ratio-1) > MeasuredTolerance {
		t.Errorf("%s: %.0f B/entry measured, the estimate says %.0f: update the overhead in package dedupsize", kind, measured/float64(n), want.BytesPerEntry)
	}
}
