package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
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

	mu      sync.Mutex
	losing  int    // ≥ 0: the step losing the answer to the commit sent
	rbuf    []byte // the server's bytes not yet handed over while losing
	scratch []byte
}

// dialPg is the member's database dialer.
func (w *wire) dialPg(ctx context.Context, network, addr string, onCommit func() (action, int), strike func(int)) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &pgConn{Conn: nc, w: w, onCommit: onCommit, strike: strike, losing: -1}
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
		c.mu.Lock()
		c.losing = step
		c.mu.Unlock()
	}
	return c.Conn.Write(b)
}

// Read hands over the server's bytes. While an answer to a commit is to
// be lost, it holds them until the commit's ReadyForQuery: a commit that
// applied ("COMMIT", then idle) is struck and the connection cut, its
// outcome unknown to the client; any other answer is handed over as is.
func (c *pgConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.losing >= 0 {
		if c.scratch == nil {
			c.scratch = make([]byte, 8<<10)
		}
		n, err := c.Conn.Read(c.scratch)
		c.rbuf = append(c.rbuf, c.scratch[:n]...)
		if done, applied := answered(c.rbuf); done {
			if applied {
				c.strike(c.losing)
				c.losing = -1
				c.Close()
				return 0, errCut
			}
			c.losing = -1
		} else if err != nil {
			c.losing = -1
		}
	}
	if len(c.rbuf) > 0 {
		n := copy(p, c.rbuf)
		c.rbuf = c.rbuf[n:]
		return n, nil
	}
	return c.Conn.Read(p)
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
