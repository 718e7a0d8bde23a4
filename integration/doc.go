// Package integration runs eosflow against a real Apache Kafka. Its tests
// run when EOS_KAFKA_BROKERS is set and skip otherwise; start a broker with
// integration/kafka/kafka.sh (see README.md).
package integration
