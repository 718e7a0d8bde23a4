package eostest

import (
	"time"

	"go.uber.org/zap"
)

// DefaultAppID is the application id a Driver runs under unless AppID
// says otherwise. It names the repartition topics, as the runtime's
// config.Config.AppID does: topology.RepartitionTopic(DefaultAppID, node).
const DefaultAppID = "eostest"

// DefaultStart is where a Driver's wall clock starts unless Start says
// otherwise: a fixed time, so that runs repeat exactly.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// defaultMaxMessageBytes is Kafka's default max.message.bytes.
const defaultMaxMessageBytes = 1048588

// Option configures a Driver.
type Option interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// config is what the options set.
type config struct {
	partitions map[string]int32 // topics declared, with their counts
	declared   []string         // declared with the default count
	defaults   int32
	maxBytes   map[string]int
	appID      string
	start      time.Time
	log        *zap.Logger
}

func newConfig(opts []Option) *config {
	c := &config{partitions: map[string]int32{}, defaults: 1, maxBytes: map[string]int{},
		appID: DefaultAppID, start: DefaultStart, log: zap.NewNop()}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

// Partitions gives topic n partitions, overriding the default (see
// DefaultPartitions). It also declares the topic, which a sink that
// chooses its topic per record (topology.ToTopicFunc) needs: as on a
// broker, writing to a topic that does not exist is an error of the sink.
// A repartition topic (topology.RepartitionTopic) given a count keeps it,
// as an existing one does in production.
func Partitions(topic string, n int32) Option {
	return optFunc(func(c *config) { c.partitions[topic] = n })
}

// DefaultPartitions gives every topic without a count of its own n
// partitions, overriding the default of 1. Repartition topics are sized
// as the runtime creates them: topology.RepartitionPartitions, else as
// many as the largest input topic upstream.
func DefaultPartitions(n int32) Option {
	return optFunc(func(c *config) { c.defaults = n })
}

// Topics declares topics with the default partition count: those a
// topology.ToTopicFunc sink may choose, which the driver cannot know
// beforehand. A windowed aggregation's late policy (Windows.Late) writes
// to its dead-letter topic whether declared or not; declare it to read
// it before a late record lands there.
func Topics(topics ...string) Option {
	return optFunc(func(c *config) { c.declared = append(c.declared, topics...) })
}

// MaxMessageBytes sets the largest record topic accepts, overriding
// Kafka's default max.message.bytes of 1048588; 0 or less accepts any.
// As in production, a sink's output over the limit is an error of the
// sink wrapping processor.ErrRecordTooLarge, handled by its error policy.
func MaxMessageBytes(topic string, n int) Option {
	return optFunc(func(c *config) { c.maxBytes[topic] = n })
}

// AppID sets the application id, overriding DefaultAppID.
func AppID(id string) Option { return optFunc(func(c *config) { c.appID = id }) }

// Start sets where the wall clock starts, overriding DefaultStart.
func Start(t time.Time) Option { return optFunc(func(c *config) { c.start = t }) }

// Logger sets where the engine logs skips, dead letters and retries,
// overriding the default of no logging.
func Logger(l *zap.Logger) Option { return optFunc(func(c *config) { c.log = l }) }
