package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
)

// errCut is what a connection returns once the schedule cut it.
var errCut = errors.New("sim: connection cut by the fault schedule")

// action is what the wire does with one request.
type action int

const (
	pass     action = iota // send it, deliver its answer
	dropReq                // cut the connection before the broker sees it
	loseResp               // the broker applies it; cut before its answer
	lateReq                // cut before the broker sees it; the broker sees it later
)

// wire is one instance's network: every connection its clients dial goes
// through it, so the schedule sees each request at the moment it is sent
// and can cut any of them, or all of them at once (a crash).
type wire struct {
	onRequest func(key int16) (action, int)             // decides each request's fate, in send order, and names its step
	onLost    func(step int)                            // an answer the step lost was due and is dropped
	onLate    func(step int, addr string, frame []byte) // delivers a request the step held back

	mu      sync.Mutex
	dead    bool
	closing bool // being closed by the supervisor: no fault strikes it
	// unmarked holds the ids whose side effect this incarnation ran and
	// has not marked: a crash now may repeat each.
	unmarked map[string]bool
	// holding holds the ids this incarnation claimed and has not yet
	// asked to complete or release: a claim of one is a renewal.
	holding map[string]bool
	conns   map[*conn]struct{}
	others  map[*pgConn]struct{} // the database's connections
}

func newWire() *wire { return &wire{conns: map[*conn]struct{}{}} }

// dial is the instance's kgo.Dialer.
func (w *wire) dial(ctx context.Context, network, host string) (net.Conn, error) {
	w.mu.Lock()
	dead := w.dead
	w.mu.Unlock()
	if dead {
		return nil, errCut
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, w: w, lost: map[int32]int{}, cutStep: -1}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		nc.Close()
		return nil, errCut
	}
	w.conns[c] = struct{}{}
	return c, nil
}

// kill cuts every connection and refuses new ones: nothing the instance
// sends from now on reaches the broker, as after a SIGKILL.
func (w *wire) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
	w.cutLocked(true)
}

// cutAll cuts every broker connection of an incarnation, as a broker
// going down does; a live one dials again. A closing one is left alone.
func (w *wire) cutAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closing {
		w.cutLocked(false)
	}
}

// cutLocked closes the broker connections, and the database's too if db,
// under w.mu. It closes the raw connections: their Close would forget
// each, taking w.mu again.
func (w *wire) cutLocked(db bool) {
	for c := range w.conns {
		c.Conn.Close()
	}
	clear(w.conns)
	if db {
		for c := range w.others {
			c.Conn.Close()
		}
		clear(w.others)
	}
}

// effectLanded records that the side effect of id ran, its mark to come,
// and reports false (nothing ran) once the incarnation is dead.
func (w *wire) effectLanded(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		return false
	}
	if w.unmarked == nil {
		w.unmarked = map[string]bool{}
	}
	w.unmarked[id] = true
	return true
}

// hold records that this incarnation holds a claim on id (held), or no
// longer does: its completion or release was asked for.
func (w *wire) hold(id string, held bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holding == nil {
		w.holding = map[string]bool{}
	}
	if held {
		w.holding[id] = true
	} else {
		delete(w.holding, id)
	}
}

// holds reports whether this incarnation holds a claim on id.
func (w *wire) holds(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holding[id]
}

// effectMarked records that the mark of id's side effect is done.
func (w *wire) effectMarked(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.unmarked, id)
}

// unmarkedIDs are the ids whose side effect ran here and is not marked.
func (w *wire) unmarkedIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Keys(w.unmarked))
}

// quiesce marks the incarnation as closing: the schedule leaves it alone.
func (w *wire) quiesce() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
}

// quiet reports whether the schedule must leave the incarnation alone.
func (w *wire) quiet() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead || w.closing
}

func (w *wire) isDead() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead
}

func (w *wire) forget(c *conn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// conn parses the Kafka frames that cross it: requests on Write (size,
// key, version, correlation id, …) and answers on Read (size, correlation
// id, …), so it can drop a request or the answer to one.
type conn struct {
	net.Conn
	w *wire

	wmu  sync.Mutex
	wbuf []byte

	lmu  sync.Mutex
	lost map[int32]int // correlation id → the step that loses its answer

	rmu     sync.Mutex
	scratch []byte
	rbuf    []byte // bytes read from the broker, not yet parsed into frames
	ready   []byte // whole answers the client may read
	cutStep int    // ≥ 0: a lost answer is next, after ready: the step that loses it
}

// Write sends whole request frames, each after the schedule has decided
// its fate.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 12 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		frame := c.wbuf[:4+size]
		key := int16(binary.BigEndian.Uint16(frame[4:]))
		corr := int32(binary.BigEndian.Uint32(frame[8:]))
		switch act, step := c.w.onRequest(key); act {
		case dropReq:
			c.cut()
			return 0, errCut
		case lateReq:
			c.w.onLate(step, c.Conn.RemoteAddr().String(), slices.Clone(frame))
			c.cut()
			return 0, errCut
		case loseResp:
			c.lmu.Lock()
			c.lost[corr] = step
			c.lmu.Unlock()
		}
		if _, err := c.Conn.Write(frame); err != nil {
			return 0, err
		}
		c.wbuf = c.wbuf[4+size:]
	}
	return len(p), nil
}

// Read hands the client whole answers. At an answer the schedule lost, it
// first hands over those before it, then cuts the connection.
func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.ready) == 0 {
		if c.cutStep >= 0 {
			c.w.onLost(c.cutStep)
			c.cut()
			return 0, errCut
		}
		if c.scratch == nil {
			c.scratch = make([]byte, 32<<10)
		}
		n, err := c.Conn.Read(c.scratch)
		c.rbuf = append(c.rbuf, c.scratch[:n]...)
		c.frames()
		if len(c.ready) == 0 && c.cutStep < 0 && err != nil {
			return 0, err
		}
	}
	n := copy(p, c.ready)
	c.ready = c.ready[n:]
	return n, nil
}

// frames moves each whole answer in rbuf to ready, up to a lost one.
func (c *conn) frames() {
	for c.cutStep < 0 && len(c.rbuf) >= 8 {
		size := int(binary.BigEndian.Uint32(c.rbuf))
		if len(c.rbuf) < 4+size {
			return
		}
		corr := int32(binary.BigEndian.Uint32(c.rbuf[4:]))
		c.lmu.Lock()
		step, lost := c.lost[corr]
		c.lmu.Unlock()
		if lost {
			c.cutStep = step
			return
		}
		c.ready = append(c.ready, c.rbuf[:4+size]...)
		c.rbuf = c.rbuf[4+size:]
	}
}

func (c *conn) cut() {
	c.Conn.Close()
	c.w.forget(c)
}

// Close closes the connection and forgets it.
func (c *conn) Close() error {
	c.w.forget(c)
	return c.Conn.Close()
}
