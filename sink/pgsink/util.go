package pgsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// quote makes a (possibly schema-qualified) checked table name an SQL
// identifier.
func quote(name string) string {
	return pgx.Identifier(strings.SplitN(name, ".", 2)).Sanitize()
}

// transient reports whether a retry can heal err: the server or the
// connection went away, the answer did not come in time, or Postgres asks
// for the transaction to be retried (serialization failure, deadlock,
// shutdown, too many connections).
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return true
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"), pe.Code == "53300": // connection, shutdown, too many connections
			return true
		case pe.Code == "57014": // query cancelled: the batch timeout
			return true
		}
		return false
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.As(err, &ce) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgx.ErrTxClosed) || strings.Contains(err.Error(), "conn closed")
}

func describeTPs(parts []tp) string {
	s := make([]string, len(parts))
	for i, k := range parts {
		s[i] = fmt.Sprintf("%s/%d", k.topic, k.partition)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func describe(m map[string]map[int32]kgo.Offset) string {
	var parts []tp
	for t, ps := range m {
		for p := range ps {
			parts = append(parts, tp{t, p})
		}
	}
	return describeTPs(parts)
}

func describeClaims(m map[tp]*claim) string {
	s := make([]string, 0, len(m))
	for k, c := range m {
		at := "start"
		if c.next >= 0 {
			at = fmt.Sprint(c.next)
		}
		s = append(s, fmt.Sprintf("%s/%d@%s (token %d)", k.topic, k.partition, at, c.token))
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// describeBatch names a batch's partitions and offset ranges.
func describeBatch(from, next map[tp]int64) string {
	s := make([]string, 0, len(next))
	for k, n := range next {
		s = append(s, fmt.Sprintf("%s/%d@%d-%d", k.topic, k.partition, from[k], n-1))
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}
