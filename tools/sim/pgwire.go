package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
)

// pgCommit is the simple-protocol query pgx sends to commit a
// transaction: 'Q', its length, "commit" and a NUL.
var pgCommit = append([]byte{'Q', 0, 0, 0, 11}, "commit\x00"...)

// pgConn is a database connection on a member's wire: it sees each
// commit as it is sent and can cut the connection before it, or drop the
// server's answer to it.
type pgConn struct {
	net.Conn
	w        *wire
	onCommit func() (action, int) // a commit's fate, and the step deciding it
	strike   func(step int)       // a lost answer was due and dropped

	losing atomic.Int64 // ≥ 0: the step losing the answer to the commit sent

	mu      sync.Mutex // held only while the answer is being lost
	rbuf    []byte     // the server's bytes not yet handed over
	scratch []byte
}

// dialPg is the member's database dialer.
func (w *wire) dialPg(ctx context.Context, network, addr string, onCommit func() (action, int), strike func(int)) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &pgConn{Conn: nc, w: w, onCommit: onCommit, strike: strike}
	c.losing.Store(-1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		nc.Close()
		return nil, errCut
	}
	if w.others == nil {
		w.others = map[*pgConn]struct{}{}
	}
	w.others[c] = struct{}{}
	return c, nil
}

// Write sends b, unless it holds a commit the schedule cuts (dropReq);
// one whose answer it loses goes out, and Read drops the answer.
func (c *pgConn) Write(b []byte) (int, error) {
	if !bytes.Contains(b, pgCommit) {
		return c.Conn.Write(b)
	}
	act, step := c.onCommit()
	switch act {
	case dropReq:
		c.Close()
		return 0, errCut
	case loseResp:
		c.losing.Store(int64(step))
	}
	return c.Conn.Write(b)
}

// Read hands over the server's bytes. While an answer to a commit is to
// be lost, it holds them until the commit's ReadyForQuery (see lose); a
// plain read holds no lock, so pgconn's background reader waiting on the
// server never blocks the commit's Write.
func (c *pgConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.rbuf) > 0 {
		n := copy(p, c.rbuf)
		c.rbuf = c.rbuf[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	if c.losing.Load() < 0 {
		n, err := c.Conn.Read(p)
		if n == 0 || c.losing.Load() < 0 {
			return n, err
		}
		// The commit went out during this read: what came is its answer.
		c.mu.Lock()
		c.rbuf = append(c.rbuf, p[:n]...)
		c.mu.Unlock()
	}
	return c.lose(p)
}

// lose reads the server's answer to the commit sent: a commit that
// applied ("COMMIT", then idle) is struck and the connection cut, its
// outcome unknown to the client; any other answer is handed over as is.
func (c *pgConn) lose(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for {
		if done, applied := answered(c.rbuf); done || err != nil {
			step := c.losing.Swap(-1)
			if applied {
				c.strike(int(step))
				c.Close()
				return 0, errCut
			}
			break
		}
		if c.scratch == nil {
			c.scratch = make([]byte, 8<<10)
		}
		var n int
		n, err = c.Conn.Read(c.scratch)
		c.rbuf = append(c.rbuf, c.scratch[:n]...)
	}
	if len(c.rbuf) == 0 {
		return 0, err
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// answered parses the server's messages in b: done once a ReadyForQuery
// came, applied if a CommandComplete "COMMIT" came before it and the
// session is idle (not in a failed transaction).
func answered(b []byte) (done, applied bool) {
	committed := false
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:]))
		if n < 4 || len(b) < 1+n {
			return false, false
		}
		body := b[5 : 1+n]
		switch b[0] {
		case 'C':
			committed = bytes.Equal(body, []byte("COMMIT\x00"))
		case 'Z':
			return true, committed && len(body) == 1 && body[0] == 'I'
		}
		b = b[1+n:]
	}
	return false, false
}

// Close closes the connection and forgets it.
func (c *pgConn) Close() error {
	c.w.mu.Lock()
	delete(c.w.others, c)
	c.w.mu.Unlock()
	return c.Conn.Close()
}
