package sim

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The group going silentBound without a commit or an Info log is a
// failure; an Info log or a commit within it is not, and a Debug log does
// not count as telling anyone.
func TestSilenceIsAFailure(t *testing.T) {
	var h hearing
	h.reset()
	if err := h.silent(); err != nil {
		t.Fatalf("silent at once: %v", err)
	}
	past := time.Now().Add(-silentBound - time.Second).UnixNano()
	h.heard.Store(past)
	h.committed.Store(past)
	if err := h.silent(); err == nil || !strings.Contains(err.Error(), "waited silently") {
		t.Fatalf("%v without a commit or a log: %v, want a failure", silentBound, err)
	}
	log := h.logger(zap.NewNop(), nil)
	log.Debug("polling")
	if h.silent() == nil {
		t.Fatal("a Debug line counted as the runtime saying what it waits for")
	}
	log.Info("waiting for the coordinator")
	if err := h.silent(); err != nil {
		t.Fatalf("an Info line just now: %v", err)
	}
	h.heard.Store(past)
	w := newWire()
	w.kill()
	h.logger(zap.NewNop(), w).Warn("a crashed incarnation running down")
	if h.silent() == nil {
		t.Fatal("a crashed incarnation's log counted as the group's")
	}
	h.committed.Store(time.Now().UnixNano())
	if err := h.silent(); err != nil {
		t.Fatalf("a commit just now: %v", err)
	}
}
