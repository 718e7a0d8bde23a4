package pgdedup

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"

	"github.com/eosflow/eosflow/dedup/internal/health"
)

// answered is a pgx tracer that tells a health.Watch of each statement
// PostgreSQL answered; Store.fail tells it of each failure.
type answered struct{ w *health.Watch }

func (a answered) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (a answered) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if d.Err == nil {
		a.w.OK()
	}
}

// inspect is the command that checks the PostgreSQL at addr.
func inspect(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "pg_isready"
	}
	return "pg_isready -h " + host + " -p " + port
}
