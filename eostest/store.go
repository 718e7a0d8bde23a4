package eostest

import (
	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/state"
)

// StateStore reads and seeds one store of the topology, its keys and
// values encoded by codecs. A store has
// one instance per task: per partition of the topic whose records reach
// it (see Partition).
type StateStore[K, V any] struct {
	d    *Driver
	spec graph.Store
	k    codec.Codec[K]
	v    codec.Codec[V]
	part int32 // -1: each key's partition
}

// Entry is one key and value of a store, and the partition whose task
// holds it.
type Entry[K, V any] struct {
	Partition int32
	Key       K
	Value     V
}

// Store returns a typed view of the store called name, which the
// topology declares (an aggregation's store is named after its node).
// Count and CountWindows keep their counts as codec.Int64 encodes them.
func Store[K, V any](d *Driver, name string, key codec.Codec[K], value codec.Codec[V]) *StateStore[K, V] {
	d.helper()
	var names []string
	for _, s := range d.eng.StoreSpecs() {
		if s.Name == name {
			if key == nil || value == nil {
				d.failf("Store %q with a nil codec", name)
			}
			return &StateStore[K, V]{d: d, spec: s, k: key, v: value, part: -1}
		}
		names = append(names, s.Name)
	}
	d.failf("the topology has no store %q; it has %v", name, names)
	return nil
}

// Partition returns a view of the store of partition p's task only.
// Without it, Get, Put and Delete use the task of the partition a record
// with the key would be piped to (see InPartition), which is where a
// store keyed by the record key (an aggregation's) keeps it, and All
// and Range read every task.
func (s *StateStore[K, V]) Partition(p int32) *StateStore[K, V] {
	s.d.helper()
	if n := s.partitions(); p < 0 || p >= n {
		s.d.failf("store %q: partition %d of %s, which has partitions 0 to %d", s.spec.Name, p, s.spec.Source, n-1)
	}
	c := *s
	c.part = p
	return &c
}

// Get returns k's value as the batches so far left it (inside Batch, with
// the open batch's writes), and whether k exists.
func (s *StateStore[K, V]) Get(k K) (V, bool) {
	s.d.helper()
	var zero V
	kb := s.key(k)
	b, ok, err := s.open(s.taskOf(kb)).Get(kb)
	if err != nil {
		s.d.failf("store %q: %v", s.spec.Name, err)
	}
	if !ok {
		return zero, false
	}
	return s.value(kb, b), true
}

// Put sets k to v at once, as if the store had restored it from its
// changelog: seed a store before piping records.
func (s *StateStore[K, V]) Put(k K, v V) {
	s.d.helper()
	kb := s.key(k)
	vb, err := s.v.Encode(v)
	if err != nil {
		s.d.failf("store %q: encoding the value of key %q: %v", s.spec.Name, kb, err)
	}
	if vb == nil {
		vb = []byte{}
	}
	s.seed(kb, vb)
}

// Delete deletes k at once, as Put writes.
func (s *StateStore[K, V]) Delete(k K) {
	s.d.helper()
	s.seed(s.key(k), nil)
}

// All returns every entry, partition by partition, each in key order.
func (s *StateStore[K, V]) All() []Entry[K, V] {
	s.d.helper()
	return s.scan(nil, nil)
}

// Range returns the entries with keys in [lo, hi) by their encoded bytes,
// partition by partition, each in key order.
func (s *StateStore[K, V]) Range(lo, hi K) []Entry[K, V] {
	s.d.helper()
	return s.scan(s.key(lo), s.key(hi))
}

func (s *StateStore[K, V]) scan(lo, hi []byte) []Entry[K, V] {
	var out []Entry[K, V]
	first, last := int32(0), s.partitions()-1
	if s.part >= 0 {
		first, last = s.part, s.part
	}
	for p := first; p <= last; p++ {
		for e, err := range s.open(p).Range(lo, hi) {
			if err != nil {
				s.d.failf("store %q: %v", s.spec.Name, err)
			}
			k, err := s.k.Decode(e.Key)
			if err != nil {
				s.d.failf("store %q: decoding key %q: %v", s.spec.Name, e.Key, err)
			}
			out = append(out, Entry[K, V]{Partition: p, Key: k, Value: s.value(e.Key, e.Value)})
		}
	}
	return out
}

func (s *StateStore[K, V]) seed(kb, vb []byte) {
	d := s.d
	d.usable("a store write")
	if d.inBatch {
		d.failf("store %q written inside a Batch: seed stores between batches", s.spec.Name)
	}
	p := s.taskOf(kb)
	if err := d.st.seed(s.spec.Name, state.Task{Topic: s.spec.Source, Partition: p}, state.Write{Key: kb, Value: vb}); err != nil {
		d.failf("store %q: %v", s.spec.Name, err)
	}
}

func (s *StateStore[K, V]) open(p int32) *store.Store {
	d := s.d
	d.usable("a store read")
	st, err := d.st.get(s.spec.Name, state.Task{Topic: s.spec.Source, Partition: p})
	if err != nil {
		d.failf("store %q: %v", s.spec.Name, err)
	}
	return st
}

// taskOf is the partition whose task holds key kb.
func (s *StateStore[K, V]) taskOf(kb []byte) int32 {
	if s.part >= 0 {
		return s.part
	}
	return s.d.partitionOf(kb, s.partitions())
}

func (s *StateStore[K, V]) partitions() int32 { return s.d.topicOf(s.spec.Source).partitions }

func (s *StateStore[K, V]) key(k K) []byte {
	b, err := s.k.Encode(k)
	if err != nil {
		s.d.failf("store %q: encoding key %v: %v", s.spec.Name, k, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func (s *StateStore[K, V]) value(kb, b []byte) V {
	v, err := s.v.Decode(b)
	if err != nil {
		s.d.failf("store %q: decoding the value of key %q: %v", s.spec.Name, kb, err)
	}
	return v
}
