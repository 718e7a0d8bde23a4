// Package bench is the harness behind `eosctl bench` and the overhead
// benchmarks: one consume-transform-produce workload run through each
// case on the same broker, measured the same way. The upper pipeline
// (ASCII upper-casing of every value, keys unchanged) goes through each
// delivery guarantee of the framework, a hand-written franz-go
// transactional loop and Kafka Streams, and exactly-once with a Dedup
// operator on each store; the count pipeline (a count per key, stateful)
// through exactly-once with each state engine and Kafka Streams'
// groupByKey().count(), and times the restore of each engine; the
// postgres pipeline writes rows into PostgreSQL with the exactly-once sink
// and with an at-least-once loop; the cpu pipeline (Crunch: JSON decode,
// SHA-256 rounds, JSON encode, about 50 µs a record) runs exactly-once
// and the raw loop at one and at two workers, to show what workers in
// one process buy on a CPU-bound transform.
package bench
