package processor

import (
	"reflect"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
)

// KV is ctx.Store(name) with typed keys and values, encoded by the codecs
// key and value: what a Process function usually wants from a store.
//
// Calling it for every record is cheap: the Context keeps the view it made
// and returns it again while the record's task, the store and the codecs
// are the same (codecs are compared with ==; codecs that cannot be
// compared, such as codec.Func, get a new view each call).
func KV[K, V, Out any](ctx Context[Out], name string, key codec.Codec[K], value codec.Codec[V]) (*state.KV[K, V], error) {
	s, err := ctx.Store(name)
	if err != nil {
		return nil, err
	}
	cache, _ := ctx.(viewCache)
	if cache != nil {
		if v, ok := cache.StoreViews()[name].(*kvView[K, V]); ok && v.kv.Store() == s && same(v.key, key) && same(v.value, value) {
			return v.kv, nil
		}
	}
	kv, err := state.NewKV(s, key, value)
	if err != nil {
		return nil, err
	}
	if cache != nil && canCompare(key) && canCompare(value) {
		cache.StoreViews()[name] = &kvView[K, V]{kv: kv, key: key, value: value}
	}
	return kv, nil
}

// viewCache is implemented by the Contexts the runtime passes, so that KV
// can reuse typed views across records instead of allocating one per call.
type viewCache interface {
	// StoreViews is a map owned by one node of one running pipeline
	// instance, never used from two goroutines at once.
	StoreViews() map[string]any
}

// kvView is a view KV made, with the codecs it was made with.
type kvView[K, V any] struct {
	kv    *state.KV[K, V]
	key   codec.Codec[K]
	value codec.Codec[V]
}

// canCompare reports whether c's type can be compared with ==. Its value
// may still hold something that cannot (an interface field holding a
// func), which same survives.
func canCompare(c any) bool { t := reflect.TypeOf(c); return t != nil && t.Comparable() }

// same reports a == b for a cached codec a, without panicking when they
// cannot be compared after all.
func same(a, b any) (eq bool) {
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !canCompare(b) {
		return false
	}
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}
