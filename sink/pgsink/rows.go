package pgsink

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
)

// Rows returns a Handler that decodes each record's value with c, turns it
// into the arguments of the statement sql with row, and sends the batch's
// statements in one round trip. A statement that changes no row (a
// duplicate skipped by Insert's ON CONFLICT DO NOTHING, a stale version
// in Versioned) counts in Stats.Unchanged. A record that fails to decode,
// or that row rejects, goes to Batch.DeadLetter: kept in the dead-letter
// table when DeadLetters is set, else it fails the batch.
func Rows[T any](c codec.Codec[T], sql string, row func(processor.Record[T]) ([]any, error)) Handler {
	return func(ctx context.Context, tx pgx.Tx, b *Batch) error {
		q := &pgx.Batch{}
		for _, r := range b.Records {
			args, err := rowArgs(c, row, r)
			if err != nil {
				if err := b.DeadLetter(ctx, tx, r, err); err != nil {
					return err
				}
				continue
			}
			q.Queue(sql, args...)
		}
		n := q.Len()
		if n == 0 {
			return nil
		}
		res := tx.SendBatch(ctx, q)
		for range n {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return err
			}
			if tag.RowsAffected() == 0 {
				b.Unchanged(1)
			}
		}
		return res.Close()
	}
}

func rowArgs[T any](c codec.Codec[T], row func(processor.Record[T]) ([]any, error), r *kgo.Record) ([]any, error) {
	v, err := c.Decode(r.Value)
	if err != nil {
		return nil, fmt.Errorf("decoding with %s: %w", codec.Name(c), err)
	}
	return row(processor.Record[T]{Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp,
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
}

// Insert is INSERT ... ON CONFLICT DO NOTHING into table's columns, $1 for
// the first: with a unique constraint on the record's id, the article's
// database-constraint pattern (a duplicate is skipped and counted).
func Insert(table string, cols ...string) string {
	return insert(table, cols) + " ON CONFLICT DO NOTHING"
}

// Upsert is INSERT ... ON CONFLICT (key) DO UPDATE of the other columns:
// natural idempotency, the last write of a key wins.
func Upsert(table string, key []string, cols ...string) string {
	set := excluded(key, cols)
	if set == "" {
		return insert(table, cols) + " ON CONFLICT (" + idents(key) + ") DO NOTHING"
	}
	return insert(table, cols) + " ON CONFLICT (" + idents(key) + ") DO UPDATE SET " + set
}

// Versioned is Upsert that updates a row only when the record's version
// column is greater than the stored one: the article's versioned state, so
// a late or repeated older version changes nothing (and counts as
// Unchanged).
func Versioned(table string, key []string, version string, cols ...string) string {
	return Upsert(table, key, cols...) + " WHERE cur." + pgx.Identifier{version}.Sanitize() +
		" < EXCLUDED." + pgx.Identifier{version}.Sanitize()
}

func insert(table string, cols []string) string {
	ps := make([]string, len(cols))
	for i := range cols {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	return "INSERT INTO " + quote(table) + " AS cur (" + idents(cols) + ") VALUES (" + strings.Join(ps, ", ") + ")"
}

func idents(cols []string) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(s, ", ")
}

func excluded(key, cols []string) string {
	var s []string
	for _, c := range cols {
		if !slices.Contains(key, c) {
			q := pgx.Identifier{c}.Sanitize()
			s = append(s, q+" = EXCLUDED."+q)
		}
	}
	return strings.Join(s, ", ")
}
