package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/codec"
)

// wireSeeds are record bodies a topic can hold: empty, text, JSON of every
// kind, broken JSON, invalid UTF-8 and deep nesting.
var wireSeeds = [][]byte{
	nil,
	{},
	[]byte("abc"),
	[]byte("\xff\xfe\x00"),
	[]byte(`{"id":1,"items":"a,b"}`),
	[]byte(`{"id":"1"}`),
	[]byte(`{"id":1e400}`),
	[]byte(`[1,2,3]`),
	[]byte(`"\ud800"`),
	[]byte("\"\xff\""),
	[]byte(`null`),
	[]byte(`{"a":{"b":[true,false,null,0.1,-0,"x"]}}`),
	[]byte(`{"id":1,"id":2}`),
	[]byte(`{`),
	[]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
}

// FuzzBytes checks that Bytes hands back exactly the record's bytes, the
// contract dead-lettering relies on.
func FuzzBytes(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := codec.Bytes()
		v, err := c.Decode(b)
		if err != nil || !bytes.Equal(v, b) {
			t.Fatalf("Decode(%q) = %q, %v", b, v, err)
		}
		enc, err := c.Encode(v)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("Encode(Decode(%q)) = %q, %v", b, enc, err)
		}
	})
}

// FuzzString checks that String keeps every byte, valid UTF-8 or not, so a
// record survives a decode and encode unchanged.
func FuzzString(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := codec.String()
		v, err := c.Decode(b)
		if err != nil || v != string(b) {
			t.Fatalf("Decode(%q) = %q, %v", b, v, err)
		}
		enc, err := c.Encode(v)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("Encode(Decode(%q)) = %q, %v", b, enc, err)
		}
	})
}

// fuzzOrder has typed fields, so that type mismatches are exercised too.
type fuzzOrder struct {
	ID    int               `json:"id"`
	Items []string          `json:"items"`
	Total float64           `json:"total"`
	Tags  map[string]string `json:"tags"`
	Next  *fuzzOrder        `json:"next"`
}

// FuzzJSON checks JSON's Decode on arbitrary bytes into a struct, a map and
// a slice: it never panics, a failure is a json error wrapped with the
// codec's message, and what decodes encodes to a stable form (encoding the
// decoded value and decoding it again gives the same value and bytes).
func FuzzJSON(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkJSON(t, codec.JSON[fuzzOrder](), b)
		checkJSON(t, codec.JSON[map[string]any](), b)
		checkJSON(t, codec.JSON[[]any](), b)
		checkJSON(t, codec.JSON[string](), b)
	})
}

func checkJSON[T any](t *testing.T, c codec.Codec[T], b []byte) {
	t.Helper()
	v, err := c.Decode(b)
	if err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if !errors.As(err, &syntax) && !errors.As(err, &typ) {
			t.Fatalf("Decode(%q) into %T: error %v (%T) is neither a *json.SyntaxError nor a *json.UnmarshalTypeError", b, v, err, errors.Unwrap(err))
		}
		if !strings.HasPrefix(err.Error(), "codec: json decode into ") {
			t.Fatalf("Decode(%q): error %q lacks the codec's prefix", b, err)
		}
		return
	}
	enc, err := c.Encode(v)
	if err != nil {
		t.Fatalf("Encode of a decoded %T (from %q): %v", v, b, err)
	}
	v2, err := c.Decode(enc)
	if err != nil {
		t.Fatalf("Decode of %q, encoded from %q: %v", enc, b, err)
	}
	if !reflect.DeepEqual(v, v2) {
		t.Fatalf("round trip of %q changed the value: %#v, then %#v", b, v, v2)
	}
	enc2, err := c.Encode(v2)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding is not stable: %q, then %q (%v)", enc, enc2, err)
	}
}

// FuzzJSONEncode checks that a value JSON cannot represent (NaN, ±Inf) is
// an error wrapping *json.UnsupportedValueError, and any other float
// round-trips exactly.
func FuzzJSONEncode(f *testing.F) {
	for _, x := range []float64{0, -1, 1.5, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		c := codec.JSON[float64]()
		b, err := c.Encode(x)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			var unsupported *json.UnsupportedValueError
			if !errors.As(err, &unsupported) || !strings.HasPrefix(err.Error(), "codec: json encode ") {
				t.Fatalf("Encode(%v) = %q, %v; want a wrapped *json.UnsupportedValueError", x, b, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode(%v): %v", x, err)
		}
		got, err := c.Decode(b)
		if err != nil || got != x {
			t.Fatalf("Decode(Encode(%v)) = %v, %v", x, got, err)
		}
	})
}
