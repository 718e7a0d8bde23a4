package integration

import (
	"testing"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
)

// Interactive queries while an instance joins and leaves, against Apache
// Kafka: every value answered is a committed count, the rest are statuses.
func TestQueriesDuringRebalance(t *testing.T) {
	for _, e := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(e.String(), func(t *testing.T) { conformance.QueriesDuringRebalance(t, realEnv(t), e) })
	}
}
