// Package tools holds the project's tooling, apart from the library: the
// chaos verifier and the fault-schedule explorer (chaos, sim, verdict),
// the benchmarks (bench), the demo, the dedup sizing calculator
// (dedupsize), and the test support that starts brokers and servers or
// runs the conformance scenarios (kafkatest, servertest, conformance,
// leak). eosctl and the tests use it; no library package imports it, and
// a test keeps it so.
package tools
