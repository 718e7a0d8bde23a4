package store

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/state"

	"github.com/eosflow/eosflow/codec"
)

type counter struct {
	N int `json:"n"`
}

func openKV[K, V any](t *testing.T, kc codec.Codec[K], vc codec.Codec[V]) (*Store, *state.KV[K, V]) {
	t.Helper()
	s, err := Open(state.Memory(), "", "counts", task)
	must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	kv, err := state.NewKV(s, kc, vc)
	must(t, err)
	return s, kv
}

func TestKV(t *testing.T) {
	s, kv := openKV(t, state.Int64Key(), codec.JSON[counter]())
	for _, k := range []int64{10, -3, 9, 0, -20} {
		must(t, kv.Put(k, counter{N: int(k * 2)}))
	}
	must(t, s.Commit(0))
	must(t, kv.Delete(0))
	v, ok, err := kv.Get(9)
	if err != nil || !ok || v.N != 18 {
		t.Fatalf("Get(9) = %v, %v, %v", v, ok, err)
	}
	if _, ok, err := kv.Get(0); ok || err != nil {
		t.Fatalf("Get(0) after Delete = %v, %v", ok, err)
	}
	var keys []int64
	for e, err := range kv.All() {
		must(t, err)
		if e.Value.N != int(e.Key*2) {
			t.Fatalf("entry %d has value %d", e.Key, e.Value.N)
		}
		keys = append(keys, e.Key)
	}
	if want := []int64{-20, -3, 9, 10}; !slices.Equal(keys, want) {
		t.Fatalf("All keys = %v, want %v (numeric order)", keys, want)
	}
	keys = nil
	for e, err := range kv.Range(-3, 10) {
		must(t, err)
		keys = append(keys, e.Key)
	}
	if want := []int64{-3, 9}; !slices.Equal(keys, want) {
		t.Fatalf("Range(-3, 10) keys = %v, want %v", keys, want)
	}
}

func TestKVPrefix(t *testing.T) {
	_, kv := openKV(t, state.StringKey(), codec.String())
	for _, k := range []string{"user:2", "order:1", "user:1", "user"} {
		must(t, kv.Put(k, strings.ToUpper(k)))
	}
	var got []string
	for e, err := range kv.Prefix("user:") {
		must(t, err)
		got = append(got, e.Key+"="+e.Value)
	}
	if want := []string{"user:1=USER:1", "user:2=USER:2"}; !slices.Equal(got, want) {
		t.Fatalf("Prefix = %q, want %q", got, want)
	}
}

var errBoom = errors.New("boom")

func failing[T any](enc, dec bool) codec.Codec[T] {
	return codec.Func[T]{
		EncodeFunc: func(v T) ([]byte, error) {
			if enc {
				return nil, errBoom
			}
			return codec.JSON[T]().Encode(v)
		},
		DecodeFunc: func(b []byte) (T, error) {
			if dec {
				var zero T
				return zero, errBoom
			}
			return codec.JSON[T]().Decode(b)
		},
	}
}

// TestKVCodecErrors checks that every codec failure names the store, the
// task, the operation and the key, and wraps the codec's error.
func TestKVCodecErrors(t *testing.T) {
	cases := []struct {
		name   string
		run    func(t *testing.T) error
		op     string
		keyHas string
	}{
		{"encode key", func(t *testing.T) error {
			_, kv := openKV(t, failing[string](true, false), codec.String())
			return kv.Put("user-7", "x")
		}, "encode key", `"user-7"`},
		{"encode value", func(t *testing.T) error {
			_, kv := openKV(t, state.StringKey(), failing[int](true, false))
			return kv.Put("user-7", 1)
		}, "encode value", `"user-7"`},
		{"decode value on get", func(t *testing.T) error {
			s, kv := openKV(t, state.StringKey(), failing[int](false, true))
			put(t, s, "user-7", "1")
			_, _, err := kv.Get("user-7")
			return err
		}, "decode value", `"user-7"`},
		{"decode value in range", func(t *testing.T) error {
			s, kv := openKV(t, state.StringKey(), codec.JSON[int]())
			put(t, s, "user-7", "not json")
			return firstErr(kv.All())
		}, "decode value", `"user-7"`},
		{"decode key in range", func(t *testing.T) error {
			s, kv := openKV(t, state.Int64Key(), codec.String())
			put(t, s, "short", "v")
			return firstErr(kv.All())
		}, "decode key", `"short"`},
		{"encode range bound", func(t *testing.T) error {
			_, kv := openKV(t, failing[string](true, false), codec.String())
			return firstErr(kv.Range("a", "b"))
		}, "encode key", `"a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run(t)
			var ce *state.CodecError
			if !errors.As(err, &ce) || !errors.Is(err, state.ErrCodec) {
				t.Fatalf("err = %v, want a *state.CodecError", err)
			}
			if ce.Store != "counts" || ce.Task != task || ce.Op != c.op || !strings.Contains(ce.Key, c.keyHas) {
				t.Fatalf("state.CodecError = %+v, want store counts, task %s, op %q, key %s", ce, task, c.op, c.keyHas)
			}
			msg := err.Error()
			for _, want := range []string{`"counts"`, "orders/3", c.op, c.keyHas} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %s", msg, want)
				}
			}
		})
	}
}

func firstErr[E any](seq func(func(E, error) bool)) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestNewKVInvalid(t *testing.T) {
	s, err := Open(state.Memory(), "", "counts", task)
	must(t, err)
	if _, err := state.NewKV[string, string](s, nil, codec.String()); !errors.Is(err, state.ErrInvalid) {
		t.Fatalf("nil key codec: %v", err)
	}
	if _, err := state.NewKV(nil, state.StringKey(), codec.String()); !errors.Is(err, state.ErrInvalid) {
		t.Fatalf("nil store: %v", err)
	}
}
