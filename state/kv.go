package state

import (
	"fmt"
	"iter"

	"github.com/eosflow/eosflow/codec"
)

// KV is a store (RawKV) with typed keys and values, encoded by codecs, so that
// user code works with its own types and gets errors naming the store and
// key when a codec fails. Range and Prefix order keys by their encoded
// bytes, so the key codec must preserve order (a < b exactly when a's
// encoding sorts before b's) for ranges to mean what they say.
// StringKey, Int64Key and Uint64Key do; codec.JSON does not order
// numbers numerically (10 encodes as "10", which sorts before "9").
type KV[K, V any] struct {
	s     RawKV
	key   codec.Codec[K]
	value codec.Codec[V]
}

// RawKV is a store as user code sees it: byte keys and values, read and
// written in the running batch. What keeps the guarantee (savepoints,
// commits, restores) is the runtime's alone, and not part of it.
type RawKV interface {
	// Name is the store's name, and Task the task (input partition)
	// whose state it holds.
	Name() string
	Task() Task
	// Get returns key's value as the batch sees it, and whether it exists.
	Get(key []byte) ([]byte, bool, error)
	// Put sets key to value, and Delete removes key, in the batch.
	Put(key, value []byte) error
	Delete(key []byte) error
	// Range yields the keys in [start, end) in byte order (nil: open),
	// and Prefix those starting with prefix, as the batch sees them.
	Range(start, end []byte) iter.Seq2[Entry[[]byte, []byte], error]
	Prefix(prefix []byte) iter.Seq2[Entry[[]byte, []byte], error]
}

// NewKV wraps s with a key codec and a value codec.
func NewKV[K, V any](s RawKV, key codec.Codec[K], value codec.Codec[V]) (*KV[K, V], error) {
	if s == nil || key == nil || value == nil {
		return nil, fmt.Errorf("%w: NewKV needs a store, a key codec and a value codec", ErrInvalid)
	}
	return &KV[K, V]{s: s, key: key, value: value}, nil
}

// Store is the untyped store underneath.
func (kv *KV[K, V]) Store() RawKV { return kv.s }

// Get returns k's value as the batch sees it, and whether k exists.
func (kv *KV[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kb, err := kv.encodeKey(k)
	if err != nil {
		return zero, false, err
	}
	b, ok, err := kv.s.Get(kb)
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := kv.value.Decode(b)
	if err != nil {
		return zero, false, kv.codecErr("decode value", fmt.Sprintf("%#v", k), err)
	}
	return v, true, nil
}

// Put sets k to v in the batch's overlay.
func (kv *KV[K, V]) Put(k K, v V) error {
	kb, err := kv.encodeKey(k)
	if err != nil {
		return err
	}
	vb, err := kv.value.Encode(v)
	if err != nil {
		return kv.codecErr("encode value", fmt.Sprintf("%#v", k), err)
	}
	return kv.s.Put(kb, vb)
}

// Delete deletes k in the batch's overlay.
func (kv *KV[K, V]) Delete(k K) error {
	kb, err := kv.encodeKey(k)
	if err != nil {
		return err
	}
	return kv.s.Delete(kb)
}

// Range yields the entries with keys in [lo, hi) in key order, as
// RawKV.Range does. A key or value that does not decode is yielded as an
// error and ends the iteration.
func (kv *KV[K, V]) Range(lo, hi K) iter.Seq2[Entry[K, V], error] {
	lb, err := kv.encodeKey(lo)
	if err != nil {
		return failed[K, V](err)
	}
	hb, err := kv.encodeKey(hi)
	if err != nil {
		return failed[K, V](err)
	}
	return kv.decode(kv.s.Range(lb, hb))
}

// Prefix yields the entries whose encoded keys start with p's encoding:
// with StringKey, the keys that start with the string p.
func (kv *KV[K, V]) Prefix(p K) iter.Seq2[Entry[K, V], error] {
	pb, err := kv.encodeKey(p)
	if err != nil {
		return failed[K, V](err)
	}
	return kv.decode(kv.s.Prefix(pb))
}

// All yields every entry in key order.
func (kv *KV[K, V]) All() iter.Seq2[Entry[K, V], error] {
	return kv.decode(kv.s.Range(nil, nil))
}

func (kv *KV[K, V]) decode(raw iter.Seq2[Entry[[]byte, []byte], error]) iter.Seq2[Entry[K, V], error] {
	return func(yield func(Entry[K, V], error) bool) {
		for e, err := range raw {
			if err != nil {
				yield(Entry[K, V]{}, err)
				return
			}
			k, err := kv.key.Decode(e.Key)
			if err != nil {
				yield(Entry[K, V]{}, kv.codecErr("decode key", fmt.Sprintf("%q", e.Key), err))
				return
			}
			v, err := kv.value.Decode(e.Value)
			if err != nil {
				yield(Entry[K, V]{}, kv.codecErr("decode value", fmt.Sprintf("%#v", k), err))
				return
			}
			if !yield(Entry[K, V]{Key: k, Value: v}, nil) {
				return
			}
		}
	}
}

func (kv *KV[K, V]) encodeKey(k K) ([]byte, error) {
	b, err := kv.key.Encode(k)
	if err != nil {
		return nil, kv.codecErr("encode key", fmt.Sprintf("%#v", k), err)
	}
	return b, nil
}

func (kv *KV[K, V]) codecErr(op, key string, err error) error {
	return &CodecError{Store: kv.s.Name(), Task: kv.s.Task(), Op: op, Key: key, Err: err}
}

func failed[K, V any](err error) iter.Seq2[Entry[K, V], error] {
	return func(yield func(Entry[K, V], error) bool) { yield(Entry[K, V]{}, err) }
}
