// Package bench is the harness behind `eosctl bench` and the overhead
// benchmarks: one consume-transform-produce workload (ASCII upper-casing
// of every value, keys unchanged) run through each delivery guarantee of
// the framework, a hand-written franz-go transactional loop and Kafka
// Streams, on the same broker, measured the same way.
package bench
