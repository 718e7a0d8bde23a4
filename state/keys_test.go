package state

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/eosflow/eosflow/codec"
)

// orderPreserved checks that c orders encodings as cmp orders values.
func orderPreserved[T cmp.Ordered](t *testing.T, c codec.Codec[T], vals []T) {
	t.Helper()
	for _, a := range vals {
		ab, err := c.Encode(a)
		must(t, err)
		back, err := c.Decode(ab)
		if err != nil || back != a {
			t.Fatalf("round trip of %v = %v, %v", a, back, err)
		}
		for _, b := range vals {
			bb, _ := c.Encode(b)
			if got, want := bytes.Compare(ab, bb), cmp.Compare(a, b); got != want {
				t.Fatalf("%v vs %v: bytes compare %d, values compare %d", a, b, got, want)
			}
		}
	}
}

func TestKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ints := []int64{math.MinInt64, -1 << 32, -256, -255, -1, 0, 1, 255, 256, 1 << 40, math.MaxInt64}
	uints := []uint64{0, 1, 255, 256, 1 << 32, math.MaxUint64}
	strs := []string{"", "a", "aa", "ab", "b", "é", "z", "\u00ff", "\U0001F600"}
	for range 50 {
		ints = append(ints, r.Int64()-math.MaxInt64/2)
		uints = append(uints, r.Uint64())
	}
	orderPreserved(t, Int64Key(), ints)
	orderPreserved(t, Uint64Key(), uints)
	orderPreserved(t, StringKey(), strs)
}

// TestJSONKeysDoNotOrderNumerically is the caveat keys.go documents.
func TestJSONKeysDoNotOrderNumerically(t *testing.T) {
	nine, _ := codec.JSON[int]().Encode(9)
	ten, _ := codec.JSON[int]().Encode(10)
	if bytes.Compare(ten, nine) >= 0 {
		t.Fatal("JSON 10 sorts after 9: the documented caveat is wrong")
	}
}

func TestKeyDecodeLength(t *testing.T) {
	if _, err := Int64Key().Decode([]byte{1, 2}); err == nil {
		t.Error("Int64Key decoded 2 bytes")
	}
	if _, err := Uint64Key().Decode(make([]byte, 9)); err == nil {
		t.Error("Uint64Key decoded 9 bytes")
	}
}
