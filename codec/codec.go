// Package codec turns record keys and values into bytes and back.
//
// A Codec is deliberately tiny so that users can bring their own (Avro,
// Protobuf, ...) with two methods; the generic parameter removes the casts
// an interface{} payload would need.
package codec

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Codec encodes and decodes values of one type.
type Codec[T any] interface {
	// Encode returns the wire form of v.
	Encode(v T) ([]byte, error)
	// Decode parses the wire form b. b belongs to the fetched record,
	// which is also what a dead-letter policy writes: never modify it.
	Decode(b []byte) (T, error)
}

// Func adapts two functions into a Codec, for one-off formats.
type Func[T any] struct {
	EncodeFunc func(T) ([]byte, error)
	DecodeFunc func([]byte) (T, error)
}

// Encode calls EncodeFunc.
func (f Func[T]) Encode(v T) ([]byte, error) { return f.EncodeFunc(v) }

// Decode calls DecodeFunc.
func (f Func[T]) Decode(b []byte) (T, error) { return f.DecodeFunc(b) }

type bytesCodec struct{}

// Bytes passes bytes through unchanged and uncopied; the cheapest codec.
// Decoded values alias the fetched record: copy before modifying them.
func Bytes() Codec[[]byte] { return bytesCodec{} }

func (bytesCodec) Encode(v []byte) ([]byte, error) { return v, nil }
func (bytesCodec) Decode(b []byte) ([]byte, error) { return b, nil }

// IsBytes reports whether c is Bytes(), whose Encode and Decode return
// their input: a pipeline can skip calling it.
func IsBytes[T any](c Codec[T]) bool {
	_, ok := any(c).(bytesCodec)
	return ok
}

type stringCodec struct{}

// String encodes strings as their UTF-8 bytes.
func String() Codec[string] { return stringCodec{} }

func (stringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }
func (stringCodec) Decode(b []byte) (string, error) { return string(b), nil }

type jsonCodec[T any] struct{}

// JSON encodes values with encoding/json.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

func (jsonCodec[T]) Encode(v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("codec: json encode %T: %w", v, err)
	}
	return b, nil
}

func (jsonCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("codec: json decode into %T: %w", v, err)
	}
	return v, nil
}

type int64Codec struct{}

// Int64 encodes an int64 as 8 big-endian bytes, as Kafka's LongSerializer
// (Serdes.Long) writes it, so Java clients read the same numbers. Count
// keeps its counts in this form.
func Int64() Codec[int64] { return int64Codec{} }

func (int64Codec) Encode(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}

func (int64Codec) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("codec: int64 has %d bytes, want 8 (big-endian, as Kafka's LongSerializer writes)", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// Name returns a short description of c for topology descriptions.
func Name[T any](c Codec[T]) string {
	switch any(c).(type) {
	case bytesCodec:
		return "bytes"
	case stringCodec:
		return "string"
	case jsonCodec[T]:
		return "json"
	case int64Codec:
		return "int64"
	case nil:
		return "<nil>"
	}
	return fmt.Sprintf("%T", c)
}
