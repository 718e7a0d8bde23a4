package integration

import (
	"testing"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
)

// Interactive queries while instances join and leave with records
// arriving, against Apache Kafka, under both group protocols: every value
// answered is a committed count, the rest are statuses.
func TestQueriesDuringRebalance(t *testing.T) {
	for _, e := range []state.Engine{state.Memory(), pebble.New()} {
		for _, gp := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
			t.Run(e.String()+"/"+string(gp), func(t *testing.T) { conformance.QueriesDuringRebalance(t, realEnv(t), e, gp) })
		}
	}
}
