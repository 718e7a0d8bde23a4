package sim

import (
	"encoding/binary"
	"io"
	"net"
	"time"
)

// late delivers frame, a request step i held back, to the broker at addr
// once the client has moved on: on a connection of its own, after
// lateBy, its answer read and dropped. The step strikes once the broker
// has answered. It releases the hold on the schedule's end that
// onRequest took for it, so the end waits for the delivery.
func (s *sim) late(i int, addr string, frame []byte) {
	go func() {
		defer s.acted()
		time.Sleep(lateBy(s.sched.Steps[i]))
		if deliver(addr, frame) {
			s.strike(i)
		}
	}()
}

// lateBy is how long step st's request is held: long enough for the
// client to have retried; it varies with the step's point and occurrence,
// so that the request lands at different moments of what follows.
func lateBy(st Step) time.Duration {
	return 100*time.Millisecond + time.Duration((st.N*7919+int(st.Point[0])*104729)%500)*time.Millisecond
}

// deliver sends frame to addr and reports whether an answer came back.
func deliver(addr string, frame []byte) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(frame); err != nil {
		return false
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return false
	}
	_, err = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:])))
	return err == nil
}
