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
# Secure mode: KAFKA_SECURE_DIR names a mounted directory holding ca.pem, broker.pem
# (key + certificate chain, PEM keystore) and admin.password, as
# integration/container/secure-certs.sh makes them. Clients then connect over SASL_SSL
# with SCRAM-SHA-512 on KAFKA_PORT; the StandardAuthorizer denies whatever no ACL
# allows, except to the super user admin, whose SCRAM credential is formatted into the
# storage; the controller listener is SASL_PLAINTEXT on loopback. Tools inside the
# container connect as admin with --command-config /opt/kafka/config/admin.properties.
# Secure mode runs a single broker+controller.
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

SCRAM=SCRAM-SHA-512
ADMIN_USER=admin
ADMIN_PASSWORD=""
if [[ -n ${KAFKA_SECURE_DIR:-} ]]; then
	sd=$KAFKA_SECURE_DIR
	for f in ca.pem broker.pem admin.password; do
		[[ -r $sd/$f ]] || {
			echo "KAFKA_SECURE_DIR=$sd has no readable $f; make the files on the host with" \
				"integration/container/secure-certs.sh DIR and mount DIR at $sd" >&2
			exit 1
		}
	done
	[[ $roles == *controller* && $roles == *broker* ]] || {
		echo "KAFKA_SECURE_DIR needs KAFKA_PROCESS_ROLES=broker,controller (got $roles)" >&2
		exit 1
	}
	ADMIN_PASSWORD=$(tr -d '[:space:]' <"$sd/admin.password")
	# It goes into JAAS strings and --add-scram's [name=...,password=...].
	[[ $ADMIN_PASSWORD =~ ^[A-Za-z0-9._~+-]+$ ]] || {
		echo "$sd/admin.password is empty or has characters other than letters, digits and ._~+-;" \
			"make a new one with integration/container/secure-certs.sh DIR --force" >&2
		exit 1
	}
	# Same settings as integration/kafka/kafka.sh --secure. The variables encode the
	# property names (see above): "__" is "_", "___" is "-".
	setdefault KAFKA_LISTENERS "SASL_SSL://0.0.0.0:$PORT,CONTROLLER://127.0.0.1:$CPORT"
	setdefault KAFKA_ADVERTISED_LISTENERS "SASL_SSL://$HOST:$PORT"
	setdefault KAFKA_LISTENER_SECURITY_PROTOCOL_MAP "SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
	setdefault KAFKA_INTER_BROKER_LISTENER_NAME SASL_SSL
	setdefault KAFKA_SASL_ENABLED_MECHANISMS $SCRAM
	setdefault KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL $SCRAM
	setdefault KAFKA_LISTENER_NAME_SASL__SSL_SCRAM___SHA___512_SASL_JAAS_CONFIG \
		"org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$ADMIN_USER\" password=\"$ADMIN_PASSWORD\";"
	setdefault KAFKA_SASL_MECHANISM_CONTROLLER_PROTOCOL PLAIN
	setdefault KAFKA_LISTENER_NAME_CONTROLLER_SASL_ENABLED_MECHANISMS PLAIN
	setdefault KAFKA_LISTENER_NAME_CONTROLLER_PLAIN_SASL_JAAS_CONFIG \
		"org.apache.kafka.common.security.plain.PlainLoginModule required username=\"$ADMIN_USER\" password=\"$ADMIN_PASSWORD\" user_$ADMIN_USER=\"$ADMIN_PASSWORD\";"
	setdefault KAFKA_SSL_KEYSTORE_TYPE PEM
	setdefault KAFKA_SSL_KEYSTORE_LOCATION "$sd/broker.pem"
	setdefault KAFKA_SSL_TRUSTSTORE_TYPE PEM
	setdefault KAFKA_SSL_TRUSTSTORE_LOCATION "$sd/ca.pem"
	setdefault KAFKA_AUTHORIZER_CLASS_NAME org.apache.kafka.metadata.authorizer.StandardAuthorizer
	setdefault KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND false
	setdefault KAFKA_SUPER_USERS "User:$ADMIN_USER"
fi
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
		KAFKA_PORT | KAFKA_ADVERTISED_HOST | KAFKA_CONTROLLER_PORT | KAFKA_SECURE_DIR) return 0 ;;
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
if [[ -n $ADMIN_PASSWORD ]]; then
	# The JAAS settings carry the admin password: keep it out of the logs.
	props=$(<"$PROPS")
	printf '%s\n' "${props//"$ADMIN_PASSWORD"/[redacted]}"
else
	cat "$PROPS"
fi

if [[ -n $ADMIN_PASSWORD ]]; then
	# The tools' --command-config for the super user, e.g. in a health check.
	(
		umask 077
		{
			echo "security.protocol=SASL_SSL"
			echo "sasl.mechanism=$SCRAM"
			echo "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$ADMIN_USER\" password=\"$ADMIN_PASSWORD\";"
			echo "ssl.truststore.type=PEM"
			echo "ssl.truststore.location=$KAFKA_SECURE_DIR/ca.pem"
		} >"$CONFIG_DIR/admin.properties"
	)
	echo "===> secure mode: SASL_SSL + $SCRAM on port $PORT, ACLs, super user $ADMIN_USER (secrets in $KAFKA_SECURE_DIR)"
fi

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
	# The super user's SCRAM credential goes into the bootstrap metadata, so it
	# exists before any listener accepts a client.
	if [[ -n $ADMIN_PASSWORD ]]; then
		args+=(--add-scram "$SCRAM=[name=$ADMIN_USER,password=$ADMIN_PASSWORD]")
	fi
	echo "===> formatting ${KAFKA_LOG_DIRS} (cluster id $CLUSTER_ID)"
	if [[ -n $ADMIN_PASSWORD ]]; then
		# The tool prints the bootstrap records, the admin's salted SCRAM keys among them.
		/opt/kafka/bin/kafka-run-class.sh kafka.tools.StorageTool "${args[@]}" |
			sed -E 's/UserScramCredentialRecord\([^)]*\)/UserScramCredentialRecord([redacted])/g'
	else
		/opt/kafka/bin/kafka-run-class.sh kafka.tools.StorageTool "${args[@]}"
	fi
fi

echo "===> starting Apache Kafka ${KAFKA_VERSION:-} (node ${KAFKA_NODE_ID}, roles $roles)"
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} \
	${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent} \
	-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
	${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$CONFIG_DIR/log4j2.properties} \
	${KAFKA_JMX_OPTS:-} ${KAFKA_OPTS:-} \
	-cp '/opt/kafka/libs/*' kafka.Kafka "$PROPS"
