package state

import (
	"encoding/binary"
	"fmt"

	"github.com/eosflow/eosflow/codec"
)

// Key codecs: their encodings sort as their values do (see KV).

// StringKey encodes strings as their UTF-8 bytes, which sort bytewise in
// code point order; Prefix on it finds keys by string prefix.
func StringKey() codec.Codec[string] { return codec.String() }

type int64Key struct{}

// Int64Key encodes int64s as 8 big-endian bytes with the sign bit
// flipped, so negative numbers sort before positive ones.
func Int64Key() codec.Codec[int64] { return int64Key{} }

func (int64Key) Encode(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)^(1<<63)), nil
}

func (int64Key) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("state: int64 key has %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), nil
}

type uint64Key struct{}

// Uint64Key encodes uint64s as 8 big-endian bytes, which sort
// numerically.
func Uint64Key() codec.Codec[uint64] { return uint64Key{} }

func (uint64Key) Encode(v uint64) ([]byte, error) { return binary.BigEndian.AppendUint64(nil, v), nil }

func (uint64Key) Decode(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("state: uint64 key has %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}
