#!/bin/bash
# Entry point of localhost/apache-kafka: render server.properties from the environment,
# format KRaft storage on first start, run the broker in the foreground.
#
# Configuration follows the apache/kafka image: every KAFKA_<NAME> variable becomes a
# broker property (NAME lower-cased; "_" -> ".", "__" -> "_", "___" -> "-"), e.g.
# KAFKA_PROCESS_ROLES=broker,controller -> process.roles=broker,controller, and
# CLUSTER_ID is the KRaft cluster id. A server.properties mounted at
# /mnt/shared/config/ is used as the base. Unlike apache/kafka, unset settings get
# defaults for a broker+controller on loopback that is ready for transactions, derived
# from these shortcuts (not rendered as properties):
#
#   KAFKA_PORT             client listener port                  9092
#   KAFKA_ADVERTISED_HOST  host clients are told to connect to   127.0.0.1
#   KAFKA_CONTROLLER_PORT  controller listener port              KAFKA_PORT + 10000
#
# Multi-node: give each container its own KAFKA_NODE_ID and KAFKA_PORT and the same
# KAFKA_CONTROLLER_QUORUM_VOTERS (e.g. 1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094)
# and CLUSTER_ID; replication factors then default to 3 and min ISR to 2.
#
# Arguments of the form NAME=VALUE are exported first (like apache/kafka); any other
# command is run instead of the broker (e.g. `bash`, `kafka-topics.sh ...`).
set -euo pipefail

if (($#)) && [[ $1 != *=* ]]; then
	exec "$@"
fi
for arg in "$@"; do export "${arg?}"; done

CONFIG_DIR=/opt/kafka/config
PROPS=$CONFIG_DIR/server.properties

PORT=${KAFKA_PORT:-9092}
HOST=${KAFKA_ADVERTISED_HOST:-127.0.0.1}
CPORT=${KAFKA_CONTROLLER_PORT:-$((PORT + 10000))}
((CPORT <= 65535)) || CPORT=$((PORT - 10000))

setdefault() { # NAME VALUE
	if [[ -z ${!1:-} ]]; then export "$1=$2"; fi
}

: "${CLUSTER_ID:=ZW9zZmxvdy1rYWZrYS0wMQ}"
setdefault KAFKA_NODE_ID 1
setdefault KAFKA_PROCESS_ROLES broker,controller
roles=$KAFKA_PROCESS_ROLES
if [[ $roles == *controller* && $roles == *broker* ]]; then
	setdefault KAFKA_LISTENERS "PLAINTEXT://0.0.0.0:$PORT,CONTROLLER://0.0.0.0:$CPORT"
elif [[ $roles == *controller* ]]; then
	setdefault KAFKA_LISTENERS "CONTROLLER://0.0.0.0:$CPORT"
else
	setdefault KAFKA_LISTENERS "PLAINTEXT://0.0.0.0:$PORT"
fi
if [[ $roles == *broker* ]]; then
	setdefault KAFKA_ADVERTISED_LISTENERS "PLAINTEXT://$HOST:$PORT"
	setdefault KAFKA_INTER_BROKER_LISTENER_NAME PLAINTEXT
fi
setdefault KAFKA_LISTENER_SECURITY_PROTOCOL_MAP "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
setdefault KAFKA_CONTROLLER_LISTENER_NAMES CONTROLLER
if [[ -z ${KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS:-} ]]; then
	setdefault KAFKA_CONTROLLER_QUORUM_VOTERS "$KAFKA_NODE_ID@127.0.0.1:$CPORT"
fi
setdefault KAFKA_LOG_DIRS /var/lib/kafka/data

# Replication defaults from the quorum size: 1 node -> RF 1, 3 or more -> RF 3, min ISR 2.
voters=${KAFKA_CONTROLLER_QUORUM_VOTERS:-1}
nodes=$(tr ',' '\n' <<<"$voters" | grep -c .)
rf=$((nodes < 3 ? nodes : 3))
isr=$((rf >= 3 ? 2 : 1))
setdefault KAFKA_DEFAULT_REPLICATION_FACTOR $rf
setdefault KAFKA_MIN_INSYNC_REPLICAS $isr
setdefault KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR $rf
setdefault KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR $rf
setdefault KAFKA_TRANSACTION_STATE_LOG_MIN_ISR $isr
setdefault KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR $rf
setdefault KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR $isr
setdefault KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS 0
setdefault KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS 10
setdefault KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS 10

# Variables that configure the JVM or this script, not the broker.
not_a_property() {
	case $1 in
	KAFKA_VERSION | KAFKA_HEAP_OPTS | KAFKA_LOG4J_OPTS | KAFKA_OPTS | KAFKA_JMX_OPTS | \
		KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_GC_LOG_OPTS | KAFKA_LOG4J_ROOT_LOGLEVEL | \
		KAFKA_LOG4J_LOGGERS | KAFKA_TOOLS_* | KAFKA_JMX_PORT | KAFKA_JMX_HOSTNAME | \
		KAFKA_PORT | KAFKA_ADVERTISED_HOST | KAFKA_CONTROLLER_PORT) return 0 ;;
	esac
	return 1
}

# KAFKA_FOO_BAR__BAZ___QUX -> foo.bar_baz-qux
property_name() {
	local k=${1#KAFKA_}
	k=${k//___/$'\x01'}
	k=${k//__/$'\x02'}
	k=${k//_/.}
	k=${k//$'\x01'/-}
	k=${k//$'\x02'/_}
	echo "${k,,}"
}

mkdir -p "$CONFIG_DIR"
{
	if [[ -f /mnt/shared/config/server.properties ]]; then
		cat /mnt/shared/config/server.properties
		echo
	fi
	while IFS= read -r name; do
		[[ $name == KAFKA_* ]] || continue
		not_a_property "$name" && continue
		printf '%s=%s\n' "$(property_name "$name")" "${!name}"
	done < <(compgen -e | sort)
} >"$PROPS"

echo "===> server.properties"
cat "$PROPS"

# Format the log directories once (a restarted container keeps its data).
formatted=1
IFS=',' read -r -a dirs <<<"$KAFKA_LOG_DIRS"
for d in "${dirs[@]}"; do
	mkdir -p "$d"
	[[ -f $d/meta.properties ]] || formatted=0
done
if ((formatted == 0)); then
	args=(format --ignore-formatted -t "$CLUSTER_ID" -c "$PROPS")
	if [[ -z ${KAFKA_CONTROLLER_QUORUM_VOTERS:-} && $roles == *controller* ]]; then
		args+=(--standalone)
	fi
	echo "===> formatting ${KAFKA_LOG_DIRS} (cluster id $CLUSTER_ID)"
	/opt/kafka/bin/kafka-run-class.sh kafka.tools.StorageTool "${args[@]}"
fi

echo "===> starting Apache Kafka ${KAFKA_VERSION:-} (node ${KAFKA_NODE_ID}, roles $roles)"
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} \
	${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent} \
	-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
	${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$CONFIG_DIR/log4j2.properties} \
	${KAFKA_JMX_OPTS:-} ${KAFKA_OPTS:-} \
	-cp '/opt/kafka/libs/*' kafka.Kafka "$PROPS"
