package pebble

import (
	"testing"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/statetest"
)

// The pebble engine keeps the promises of state.Backend, across reopens.
func TestConformance(t *testing.T) {
	statetest.Run(t, statetest.Engine{New: func() state.Engine { return New() }, Persistent: true})
}
