package eos_test

import (
	"testing"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// TestQueriesOnBusyInstance: an instance in the middle of a long batch
// whose revoke franz-go's transact session swallowed stops serving the
// partitions it gave up before another instance answers past its values,
// under both group protocols.
func TestQueriesOnBusyInstance(t *testing.T) {
	for _, gp := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		t.Run(string(gp), func(t *testing.T) {
			conformance.QueriesOnBusyInstance(t, kafkatest.Fake(t), gp)
		})
	}
}
