// Package kafkautil is the Kafka plumbing the runtime, eosctl and the
// demo, benchmark, chaos and test harnesses share: which errors no retry
// fixes, the client options a pipeline runs with, topic creation and
// seeding. Each rule lives here once, so the copies cannot drift apart.
package kafkautil
