#!/bin/sh
# kafka-run-class.sh CLASS [ARGS...] — run a class from the broker's jars, like the
# script of the same name in the Kafka distribution (tools log at WARN on stderr).
[ $# -ge 1 ] || { echo "usage: kafka-run-class.sh CLASS [ARGS...]" >&2; exit 2; }
exec java ${KAFKA_TOOLS_HEAP_OPTS:--Xmx256m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
	-Dlog4j2.configurationFile=${KAFKA_TOOLS_LOG4J_CONFIG:-/opt/kafka/config/tools-log4j2.properties} \
	${KAFKA_TOOLS_OPTS:-} -cp '/opt/kafka/libs/*' "$@"
