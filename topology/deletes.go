package topology

import (
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Deletes. A table's updates flow through its stream's port, typed; a
// deleted row has no value to pass, so its deletes flow apart, through a
// port of their own, to the nodes that handle them: the table-table joins
// (tablejoin.go), which delete or update the joined row, and ToTable,
// which writes a tombstone. Only TableFrom, the table-table joins and
// session windows under every-update output (retracted sessions, see
// sessionretract.go) delete rows, so the other tables have no such port,
// and a record that is no tombstone never
// touches one. No table's node joins a fused chain (see fuse.go), so
// deletes run the same fused or not, and follow the graph's edges:
// Describe shows their way too.

// deletes fans a table's deleted rows out: each gets the key, and the
// headers, timestamp and origin of the tombstone that deleted it.
type deletes struct {
	next []func(graph.Exec, Record[struct{}]) error
}

// add makes fn handle the table's deletes.
func (d *deletes) add(fn func(graph.Exec, Record[struct{}]) error) {
	d.next = append(d.next, fn)
}

// push passes the delete r on.
func (d *deletes) push(x graph.Exec, r Record[struct{}]) error {
	for _, fn := range d.next {
		if err := fn(x, r); err != nil {
			return err
		}
	}
	return nil
}

// deleteRow is what TableFrom's node n does with a tombstone r: it deletes
// the key's row from the table's store st and, if there was one, passes
// the delete on. A key the table does not hold changes nothing.
func deleteRow(x graph.Exec, n *Node, st *store.Store, del *deletes, r *kgo.Record) error {
	_, found, err := st.Get(r.Key)
	if err != nil {
		return storeFailed(x, n, err)
	}
	if !found {
		return nil
	}
	if err := st.Delete(r.Key); err != nil {
		return storeFailed(x, n, err)
	}
	return del.push(x, Record[struct{}]{Key: r.Key, Headers: r.Headers, Timestamp: r.Timestamp,
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
}

// tombstone is how ToTable's sink n writes a deleted row: the key with a
// nil value (no codec call), where tg sends the key's updates. A
// Partitioner gets the zero value.
func tombstone[T any](n *Node, tg sinkTarget[T]) func(graph.Exec, Record[struct{}]) error {
	return func(x graph.Exec, r Record[struct{}]) error {
		x.Enter(n.index)
		var zero T
		return tg.deliver(x, n, Record[T]{Key: r.Key, Value: zero, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, nil)
	}
}
