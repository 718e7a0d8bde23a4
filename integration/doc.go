// Package integration runs eosflow against a real Apache Kafka. Its tests
// run when EOS_KAFKA_BROKERS is set and skip otherwise; start a broker with
// integration/kafka/kafka.sh (see README.md). The TestSecure* tests need a
// secured broker instead (SASL_SSL, SCRAM, ACLs): they run when
// EOS_KAFKA_SECURE_ENV names the file `kafka.sh start --secure` prints.
package integration
