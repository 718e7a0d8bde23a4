// Package pgsink writes Kafka records into PostgreSQL exactly once, with no
// Kafka transaction: each batch's rows and the batch's input offsets commit
// in one Postgres transaction, or neither does.
//
// The offsets live in a table (DefaultOffsetsTable, keyed by group, topic
// and partition), not in Kafka. When the consumer group assigns a partition
// to an instance, the instance claims it in that table (a fencing token per
// partition, bumped by each claim) and starts reading where the table says;
// every commit updates the partition's row only if the token is still the
// instance's. An instance that lost its partitions (a zombie that paused
// past the session timeout) can therefore not commit: its transaction rolls
// back, whatever the group told it. Offsets are also committed to Kafka
// after each database commit, so lag tools see progress, but Kafka's
// offsets are never read back.
//
// This is the article's idempotent-consumer pattern with the offsets inside
// the database transaction. The row statements can still use the other
// patterns for duplicates in the data itself (two records with one id): a
// unique constraint with ON CONFLICT DO NOTHING (Insert), natural
// idempotency (Upsert) or versioned updates (Versioned).
package pgsink
