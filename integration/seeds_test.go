package integration

import (
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

func kgoSeeds(env *kafkatest.Env) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(env.Brokers...), kgo.DialTimeout(5 * time.Second)}
}
