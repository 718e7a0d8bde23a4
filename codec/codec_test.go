package codec_test

import (
	"bytes"
	"testing"

	"github.com/eosflow/eosflow/codec"
)

type order struct {
	ID    int    `json:"id"`
	Items string `json:"items"`
}

func TestRoundTrips(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		b, _ := codec.Bytes().Encode([]byte("abc"))
		got, err := codec.Bytes().Decode(b)
		if err != nil || !bytes.Equal(got, []byte("abc")) {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("string", func(t *testing.T) {
		b, _ := codec.String().Encode("héllo")
		s, err := codec.String().Decode(b)
		if err != nil || s != "héllo" {
			t.Fatalf("got %q, %v", s, err)
		}
	})
	t.Run("json", func(t *testing.T) {
		c := codec.JSON[order]()
		b, err := c.Encode(order{ID: 7, Items: "tea"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := c.Decode(b)
		if err != nil || o != (order{ID: 7, Items: "tea"}) {
			t.Fatalf("got %+v, %v", o, err)
		}
	})
	t.Run("json decode error names the type", func(t *testing.T) {
		_, err := codec.JSON[order]().Decode([]byte("{not json"))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("codec_test.order")) {
			t.Fatalf("want an error naming the target type, got %v", err)
		}
	})
}

func TestName(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
	}{
		{"bytes", codec.Name(codec.Bytes())},
		{"string", codec.Name(codec.String())},
		{"json", codec.Name(codec.JSON[order]())},
	} {
		if tc.got != tc.name {
			t.Errorf("Name = %q, want %q", tc.got, tc.name)
		}
	}
}

// IsBytes is what lets a pipeline skip a codec: only Bytes passes values
// through unchanged.
func TestIsBytes(t *testing.T) {
	if !codec.IsBytes(codec.Bytes()) {
		t.Error("Bytes() not recognised")
	}
	same := codec.Func[[]byte]{
		EncodeFunc: func(b []byte) ([]byte, error) { return b, nil },
		DecodeFunc: func(b []byte) ([]byte, error) { return b, nil },
	}
	if codec.IsBytes[[]byte](same) || codec.IsBytes(codec.String()) || codec.IsBytes(codec.JSON[[]byte]()) || codec.IsBytes[[]byte](nil) {
		t.Error("only Bytes() passes values through by definition")
	}
}

// Int64 writes what Kafka's LongSerializer writes, and refuses what is
// not 8 bytes.
func TestInt64IsLongSerializerBytes(t *testing.T) {
	c := codec.Int64()
	b, err := c.Encode(258)
	if err != nil || !bytes.Equal(b, []byte{0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Fatalf("Encode(258) = %x, %v", b, err)
	}
	if v, err := c.Decode(b); err != nil || v != 258 {
		t.Errorf("Decode = %d, %v", v, err)
	}
	if b, _ := c.Encode(-1); !bytes.Equal(b, []byte{255, 255, 255, 255, 255, 255, 255, 255}) {
		t.Errorf("Encode(-1) = %x", b)
	}
	if _, err := c.Decode([]byte("258")); err == nil {
		t.Error("a 3-byte value decoded")
	}
	if codec.Name(c) != "int64" {
		t.Errorf("Name = %q", codec.Name(c))
	}
}
