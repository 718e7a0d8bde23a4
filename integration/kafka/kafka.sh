#!/usr/bin/env bash
# kafka.sh — run a real Apache Kafka (KRaft) on loopback without Docker.
#
#   kafka.sh start   [--cluster N] [--node I] [--secure]
#                                               fetch (once), format (once), start, wait until ready;
#                                               --secure: SASL_SSL + SCRAM-SHA-512 + ACLs, and a mutual-TLS
#                                               listener on port + 20000 (see README.md)
#   kafka.sh stop    [--node I]                 SIGTERM, wait, SIGKILL after EOS_KAFKA_STOP_TIMEOUT
#   kafka.sh kill    [--node I]                 SIGKILL (hard crash; data dirs are kept)
#   kafka.sh restart [--hard] [--node I]        stop (or kill with --hard), then start on the same data
#   kafka.sh status  [--node I]                 exit 0 when every addressed node runs
#   kafka.sh bootstrap                          print the bootstrap address list
#   kafka.sh pid     [--node I]                 print the pid of each addressed running node
#   kafka.sh clean                              stop and delete the data of the current layout
#   kafka.sh fetch                              only download the broker into the cache
#   kafka.sh secure-env                         print EOS_* variables to connect to a --secure layout
#   kafka.sh mtls-env                           the same for its mutual-TLS listener (client certificate)
#
# The broker jars come from Maven Central (see pom.xml next to this script) and are
# cached in integration/kafka/.dist/ (EOS_KAFKA_CACHE). Node data, configs, logs and
# pid files live in integration/kafka/.run/<layout>/node-<I>/ (EOS_KAFKA_RUN_DIR),
# where <layout> is single-<port> or cluster<N>-<port>. See README.md.
#
# Hooks for harnesses that place nodes elsewhere (netcluster.sh): EOS_KAFKA_NODE_HOSTS,
# one address per node, replaces 127.0.0.1 for that node's listeners; EOS_KAFKA_NODE_PREFIX
# is a command that launches node I's JVM, with {node} replaced by I.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
POM="$SCRIPT_DIR/pom.xml"
CACHE_DIR=${EOS_KAFKA_CACHE:-$SCRIPT_DIR/.dist}
RUN_ROOT=${EOS_KAFKA_RUN_DIR:-$SCRIPT_DIR/.run}
HOST=127.0.0.1
START_TIMEOUT=${EOS_KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=${EOS_KAFKA_STOP_TIMEOUT:-30}
JAVA=${JAVA:-java}
if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then JAVA=$JAVA_HOME/bin/java; fi

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
}

pom_version() {
	sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1
}
VERSION=${EOS_KAFKA_VERSION:-$(pom_version)}
[[ -n $VERSION ]] || die "cannot read <kafka.version> from $POM"
DIST="$CACHE_DIR/kafka-$VERSION"
LIBS="$DIST/libs"

# ---------------------------------------------------------------- arguments

CMD=${1:-}
[[ -n $CMD ]] || usage
shift
NODES_ARG=""
NODE=""
HARD=0
SECURE_ARG=0
while (($#)); do
	case $1 in
	--cluster) NODES_ARG=${2:?--cluster needs a node count}; shift 2 ;;
	--cluster=*) NODES_ARG=${1#*=}; shift ;;
	--node) NODE=${2:?--node needs a node id}; shift 2 ;;
	--node=*) NODE=${1#*=}; shift ;;
	--hard) HARD=1; shift ;;
	--secure) SECURE_ARG=1; shift ;;
	-h | --help) usage ;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
done
[[ -z $NODES_ARG && -n ${EOS_KAFKA_NODES:-} ]] && NODES_ARG=$EOS_KAFKA_NODES

# The layout (node count + base port) comes from, in order: --cluster / EOS_KAFKA_NODES
# and EOS_KAFKA_PORT; the layout last started and not cleanly stopped (.run/current);
# a single node on 9092.
CURRENT_FILE="$RUN_ROOT/current"
NODES=1
BASE_PORT=9092
if [[ -n $NODES_ARG || -n ${EOS_KAFKA_PORT:-} ]]; then
	NODES=${NODES_ARG:-1}
	BASE_PORT=${EOS_KAFKA_PORT:-9092}
elif [[ -f $CURRENT_FILE ]]; then
	read -r NODES BASE_PORT <"$CURRENT_FILE" || true
fi
[[ $NODES =~ ^[1-9]$ ]] || die "node count must be 1..9, got '$NODES'"
[[ $BASE_PORT =~ ^[0-9]+$ ]] && ((BASE_PORT > 0 && BASE_PORT + NODES <= 65536)) || die "bad port '$BASE_PORT'"
# EOS_KAFKA_NODE_HOSTS: node I listens on, advertises and runs its controller on
# the I-th address instead of 127.0.0.1 (e.g. in a network namespace of its own).
NODE_HOSTS=${EOS_KAFKA_NODE_HOSTS:-}
read -r -a NODE_HOSTS <<<"${NODE_HOSTS//,/ }"
if ((${#NODE_HOSTS[@]})); then
	((${#NODE_HOSTS[@]} >= NODES)) || die "EOS_KAFKA_NODE_HOSTS names ${#NODE_HOSTS[@]} address(es) for $NODES nodes"
fi
if [[ -n $NODE ]]; then
	[[ $NODE =~ ^[0-9]+$ ]] && ((NODE >= 1 && NODE <= NODES)) || die "--node must be 1..$NODES for this $NODES-node layout"
fi

if ((NODES == 1)); then LAYOUT="single-$BASE_PORT"; else LAYOUT="cluster$NODES-$BASE_PORT"; fi
LAYOUT_DIR="$RUN_ROOT/$LAYOUT"

# A layout first started with --secure stays secure: its storage holds the
# SCRAM credentials, and the marker file makes every later command (start,
# restart, the readiness probe, secure-env) use SASL_SSL.
SECURE_DIR="$LAYOUT_DIR/secure"
SECURE=0
[[ -f $SECURE_DIR/.complete ]] && SECURE=1
SCRAM=SCRAM-SHA-512
ADMIN_USER=admin

# Controller listener of node I: broker port + 10000 (or - 10000 near the top of the range).
# Mutual-TLS listener of a secure node I: broker port + 20000 (or - 20000). Broker ports
# of a layout span at most 9, so neither offset can land on another node's port.
broker_port() { echo $((BASE_PORT + $1 - 1)); }
node_host() { echo "${NODE_HOSTS[$1 - 1]:-$HOST}"; }
offset_port() { # node id, offset
	local p=$(($(broker_port "$1") + $2))
	((p > 65535)) && p=$(($(broker_port "$1") - $2))
	echo "$p"
}
controller_port() { offset_port "$1" 10000; }
mtls_port() { offset_port "$1" 20000; }
node_dir() { echo "$LAYOUT_DIR/node-$1"; }
bootstrap() {
	local i out=""
	for ((i = 1; i <= NODES; i++)); do out+="${out:+,}$(node_host "$i"):$(broker_port "$i")"; done
	echo "$out"
}
mtls_bootstrap() {
	local i out=""
	for ((i = 1; i <= NODES; i++)); do out+="${out:+,}$HOST:$(mtls_port "$i")"; done
	echo "$out"
}
selected_nodes() {
	if [[ -n $NODE ]]; then echo "$NODE"; else seq 1 "$NODES"; fi
}

# ---------------------------------------------------------------- fetch

fetch() {
	[[ -f $DIST/.complete ]] && return 0
	mkdir -p "$CACHE_DIR"
	command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
	(
		flock 9
		[[ -f $DIST/.complete ]] && exit 0
		local t0=$SECONDS tmp="$DIST.tmp.$$"
		log "fetching org.apache.kafka:kafka_2.13:$VERSION and its runtime dependencies from Maven Central"
		rm -rf "$tmp"
		mkdir -p "$tmp"
		mvn -q -B -f "$POM" dependency:copy-dependencies \
			-Dkafka.version="$VERSION" -DoutputDirectory="$tmp/libs" >"$tmp/mvn.log" 2>&1 ||
			{ cat "$tmp/mvn.log" >&2; rm -rf "$tmp"; die "maven could not fetch Kafka $VERSION"; }
		[[ -f $tmp/libs/kafka_2.13-$VERSION.jar ]] || { rm -rf "$tmp"; die "kafka_2.13-$VERSION.jar missing after fetch"; }
		rm -rf "$DIST"
		mv "$tmp" "$DIST"
		echo "$VERSION" >"$DIST/.complete"
		log "fetched $(find "$DIST/libs" -name '*.jar' | wc -l) jars ($(du -sh "$DIST/libs" | cut -f1)) in $((SECONDS - t0))s into $DIST"
	) 9>"$CACHE_DIR/.fetch.lock"
}

# ---------------------------------------------------------------- security

# setup_secure makes, once per layout, the admin password and the
# certificates: a CA (ca.pem, what clients trust) and one broker certificate
# for 127.0.0.1 and localhost signed by it (broker.pem: key + chain, Kafka's
# PEM keystore format). Go clients need only ca.pem; client_certs adds the
# client certificates of the mutual-TLS listener.
setup_secure() {
	[[ -f $SECURE_DIR/.complete ]] && return 0
	command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
	local i
	for ((i = 1; i <= NODES; i++)); do
		[[ -f $(node_dir "$i")/data/meta.properties ]] &&
			die "layout $LAYOUT was formatted without --secure; run '$0 clean' first (it deletes its data)"
	done
	rm -rf "$SECURE_DIR"
	mkdir -p "$SECURE_DIR"
	chmod 700 "$SECURE_DIR"
	(
		cd "$SECURE_DIR"
		openssl rand -hex 16 >admin.password
		openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=eosflow test CA" \
			-keyout ca.key -out ca.pem
		openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" -keyout broker.key -out broker.csr
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >broker.ext
		openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
			-extfile broker.ext -out broker.crt
		cat broker.key broker.crt ca.pem >broker.pem
		chmod 600 ./*
	) >"$LAYOUT_DIR/openssl.out" 2>&1 || { cat "$LAYOUT_DIR/openssl.out" >&2; die "openssl could not make the certificates"; }
	write_admin_properties
	touch "$SECURE_DIR/.complete"
	SECURE=1
	log "secure layout: CA $SECURE_DIR/ca.pem, super user $ADMIN_USER (password in $SECURE_DIR/admin.password)"
}

# APP_CN is the least-privilege principal (User:eosflow-app) of the
# client-app certificate: it holds no ACL until one is granted.
APP_CN=eosflow-app

# client_certs makes the client certificates the mutual-TLS listener
# accepts, on every start of a secure layout, so a layout made before they
# existed gets them too: client-admin (CN=admin, so the principal is the
# super user User:admin) and client-app (CN=eosflow-app) signed by the
# layout's CA; and client-untrusted (CN=admin too) signed by a CA of its own
# (untrusted-ca.pem) that the brokers do not trust, for negative tests.
# Existing files are kept.
client_certs() {
	[[ -f $SECURE_DIR/client-admin.crt && -f $SECURE_DIR/client-app.crt && -f $SECURE_DIR/client-untrusted.crt ]] && return 0
	command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
	[[ -f $SECURE_DIR/ca.key ]] || die "$SECURE_DIR/ca.key is missing, so no client certificate can be signed; run '$0 clean' (it deletes the layout's data) and start --secure again"
	(
		cd "$SECURE_DIR"
		# set -e is off in a subshell tested by ||: every step checks.
		sign() { # name common-name ca-cert ca-key
			[[ -f $1.crt ]] && return 0
			openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" &&
				openssl x509 -req -in "$1.csr" -CA "$3" -CAkey "$4" -CAcreateserial -sha256 -days 3650 \
					-extfile client.ext -out "$1.crt.tmp" &&
				mv "$1.crt.tmp" "$1.crt"
		}
		printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
			sign client-admin "$ADMIN_USER" ca.pem ca.key &&
			sign client-app "$APP_CN" ca.pem ca.key &&
			{ [[ -f untrusted-ca.pem ]] || openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
				-subj "/CN=eosflow untrusted test CA" -keyout untrusted-ca.key -out untrusted-ca.pem; } &&
			sign client-untrusted "$ADMIN_USER" untrusted-ca.pem untrusted-ca.key &&
			chmod 600 ./*
	) >"$LAYOUT_DIR/openssl-client.out" 2>&1 || { cat "$LAYOUT_DIR/openssl-client.out" >&2; die "openssl could not make the client certificates"; }
	log "mutual TLS: client certificates client-admin (User:$ADMIN_USER), client-app (User:$APP_CN), client-untrusted in $SECURE_DIR"
}

admin_password() { cat "$SECURE_DIR/admin.password"; }

# admin.properties is the Java tools' --command-config for the super user.
write_admin_properties() {
	{
		echo "security.protocol=SASL_SSL"
		echo "sasl.mechanism=$SCRAM"
		echo "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$ADMIN_USER\" password=\"$(admin_password)\";"
		echo "ssl.truststore.type=PEM"
		echo "ssl.truststore.location=$SECURE_DIR/ca.pem"
	} >"$SECURE_DIR/admin.properties"
	chmod 600 "$SECURE_DIR/admin.properties"
}

# secure_config prints the broker settings of a secure node: clients and
# brokers use SASL_SSL with SCRAM-SHA-512, the loopback controller listener
# SASL_PLAINTEXT with PLAIN for the super user only, and the KRaft
# StandardAuthorizer denies whatever no ACL allows.
#
# A second client listener, SSL, requires a client certificate signed by the
# CA (mutual TLS, on that listener only); its principal is the certificate's
# CN: CN=foo is User:foo.
secure_config() { # broker-port controller-port mtls-port
	local pw
	pw=$(admin_password)
	echo "listeners=SASL_SSL://$HOST:$1,SSL://$HOST:$3,CONTROLLER://$HOST:$2"
	echo "advertised.listeners=SASL_SSL://$HOST:$1,SSL://$HOST:$3"
	echo "listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SASL_PLAINTEXT"
	echo "listener.name.ssl.ssl.client.auth=required"
	echo "ssl.principal.mapping.rules=RULE:^CN=([^,]+).*\$/\$1/,DEFAULT"
	echo "inter.broker.listener.name=SASL_SSL"
	echo "controller.listener.names=CONTROLLER"
	echo "sasl.enabled.mechanisms=$SCRAM"
	echo "sasl.mechanism.inter.broker.protocol=$SCRAM"
	echo "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$ADMIN_USER\" password=\"$pw\";"
	echo "sasl.mechanism.controller.protocol=PLAIN"
	echo "listener.name.controller.sasl.enabled.mechanisms=PLAIN"
	echo "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"$ADMIN_USER\" password=\"$pw\" user_$ADMIN_USER=\"$pw\";"
	echo "ssl.keystore.type=PEM"
	echo "ssl.keystore.location=$SECURE_DIR/broker.pem"
	echo "ssl.truststore.type=PEM"
	echo "ssl.truststore.location=$SECURE_DIR/ca.pem"
	echo "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	echo "allow.everyone.if.no.acl.found=false"
	echo "super.users=User:$ADMIN_USER"
}

# secure_env prints how a client connects as the super user, as the EOS_*
# variables config.FromEnv reads (and EOS_KAFKA_BROKERS for the tests).
secure_env() {
	((SECURE)) || die "layout $LAYOUT is not secure; start it with '$0 start --secure'"
	echo "EOS_BROKERS=$(bootstrap)"
	echo "EOS_KAFKA_BROKERS=$(bootstrap)"
	echo "EOS_TLS_ENABLED=true"
	echo "EOS_TLS_CA_FILE=$SECURE_DIR/ca.pem"
	echo "EOS_SASL_MECHANISM=$SCRAM"
	echo "EOS_SASL_USERNAME=$ADMIN_USER"
	echo "EOS_SASL_PASSWORD=$(admin_password)"
}

# mtls_env prints how a client connects to the mutual-TLS listener as the
# super user, authenticated by its certificate alone.
mtls_env() {
	((SECURE)) || die "layout $LAYOUT is not secure; start it with '$0 start --secure'"
	[[ -f $SECURE_DIR/client-admin.crt ]] || die "layout $LAYOUT has no client certificates yet; '$0 start' makes them"
	echo "EOS_BROKERS=$(mtls_bootstrap)"
	echo "EOS_TLS_ENABLED=true"
	echo "EOS_TLS_CA_FILE=$SECURE_DIR/ca.pem"
	echo "EOS_TLS_CERT_FILE=$SECURE_DIR/client-admin.crt"
	echo "EOS_TLS_KEY_FILE=$SECURE_DIR/client-admin.key"
}

# test_env prints the file the TestSecure* tests read: secure_env's lines,
# then the mutual-TLS listener under EOS_KAFKA_MTLS_* names (so they do not
# override the SASL_SSL ones), the CA key that signs certificates for new
# principals at test time, and the certificates of client_certs.
test_env() {
	secure_env
	echo "EOS_KAFKA_MTLS_BROKERS=$(mtls_bootstrap)"
	echo "EOS_KAFKA_MTLS_CERT_FILE=$SECURE_DIR/client-admin.crt"
	echo "EOS_KAFKA_MTLS_KEY_FILE=$SECURE_DIR/client-admin.key"
	echo "EOS_KAFKA_CA_KEY_FILE=$SECURE_DIR/ca.key"
	echo "EOS_KAFKA_APP_CERT_FILE=$SECURE_DIR/client-app.crt"
	echo "EOS_KAFKA_APP_KEY_FILE=$SECURE_DIR/client-app.key"
	echo "EOS_KAFKA_UNTRUSTED_CERT_FILE=$SECURE_DIR/client-untrusted.crt"
	echo "EOS_KAFKA_UNTRUSTED_KEY_FILE=$SECURE_DIR/client-untrusted.key"
}

# ---------------------------------------------------------------- config

write_log4j() {
	cat >"$LAYOUT_DIR/log4j2.properties" <<'EOF'
# Broker logging: one rolling file per node (kafka.log in the node directory).
name = eosflow-kafka
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/kafka.log
appender.file.filePattern = ${sys:kafka.logs.dir}/kafka.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
EOF
	cat >"$LAYOUT_DIR/log4j2-tools.properties" <<'EOF'
# Command line tools: warnings only, on stderr.
name = eosflow-kafka-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
}

write_config() { # node id
	local i=$1 dir bp cp voters="" j h
	dir=$(node_dir "$i")
	h=$(node_host "$i")
	bp=$(broker_port "$i")
	cp=$(controller_port "$i")
	mkdir -p "$dir/data"
	{
		echo "# Generated by kafka.sh on every start; edit EOS_KAFKA_EXTRA_CONFIG instead."
		echo "process.roles=broker,controller"
		echo "node.id=$i"
		if ((SECURE)); then
			secure_config "$bp" "$cp" "$(mtls_port "$i")"
		else
			echo "listeners=PLAINTEXT://$h:$bp,CONTROLLER://$h:$cp"
			echo "advertised.listeners=PLAINTEXT://$h:$bp"
			echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
			echo "inter.broker.listener.name=PLAINTEXT"
			echo "controller.listener.names=CONTROLLER"
		fi
		if ((NODES == 1)); then
			# Single-node dynamic quorum, formatted with --standalone.
			echo "controller.quorum.bootstrap.servers=$HOST:$cp"
		else
			# Static quorum: every node is a voter.
			for ((j = 1; j <= NODES; j++)); do voters+="${voters:+,}$j@$(node_host "$j"):$(controller_port "$j")"; done
			echo "controller.quorum.voters=$voters"
		fi
		echo "log.dirs=$dir/data"
		local rf=$((NODES < 3 ? NODES : 3)) isr=1
		((rf >= 3)) && isr=2
		echo "default.replication.factor=$rf"
		echo "min.insync.replicas=$isr"
		echo "offsets.topic.replication.factor=$rf"
		echo "transaction.state.log.replication.factor=$rf"
		echo "transaction.state.log.min.isr=$isr"
		echo "share.coordinator.state.topic.replication.factor=$rf"
		echo "share.coordinator.state.topic.min.isr=$isr"
		# Fewer internal partitions than the default 50: faster first use on small machines.
		echo "offsets.topic.num.partitions=10"
		echo "transaction.state.log.num.partitions=10"
		echo "group.initial.rebalance.delay.ms=0"
		echo "num.partitions=1"
		echo "auto.create.topics.enable=true"
		echo "unclean.leader.election.enable=false"
		# Extra key=value settings, one per line or separated by spaces.
		if [[ -n ${EOS_KAFKA_EXTRA_CONFIG:-} ]]; then
			tr ' ' '\n' <<<"$EOS_KAFKA_EXTRA_CONFIG" | sed '/^$/d'
		fi
	} >"$dir/server.properties"
	chmod 600 "$dir/server.properties"
}

cluster_id() {
	local f="$LAYOUT_DIR/cluster.id"
	if [[ ! -s $f ]]; then
		# A Kafka cluster id is a base64url-encoded (unpadded) 16-byte UUID.
		# One starting with '-' reads as an option to kafka-storage (Kafka's
		# own generator skips those too), so draw again.
		local id=-
		while [[ $id == -* ]]; do
			id=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		done
		printf '%s' "$id" >"$f"
	fi
	cat "$f"
}

java_tool() { # class args...
	"$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Dlog4j2.configurationFile="$LAYOUT_DIR/log4j2-tools.properties" \
		-cp "$LIBS/*" "$@"
}

format_node() { # node id
	local i=$1 dir
	dir=$(node_dir "$i")
	[[ -f $dir/data/meta.properties ]] && return 0
	local args=(format -t "$(cluster_id)" -c "$dir/server.properties")
	((NODES == 1)) && args+=(--standalone)
	# The super user's SCRAM credential goes into the bootstrap metadata, so
	# it exists before any listener accepts a client.
	((SECURE)) && args+=(--add-scram "$SCRAM=[name=$ADMIN_USER,password=$(admin_password)]")
	log "formatting node $i storage in $dir/data"
	java_tool kafka.tools.StorageTool "${args[@]}" >"$dir/format.out" 2>&1 ||
		{ cat "$dir/format.out" >&2; die "formatting node $i failed"; }
}

# ---------------------------------------------------------------- processes

node_pid() { # node id -> pid of a live broker, or nothing
	local f pid
	f="$(node_dir "$1")/kafka.pid"
	[[ -f $f ]] || return 0
	read -r pid <"$f" || return 0
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && grep -qa 'kafka.Kafka' "/proc/$pid/cmdline" 2>/dev/null; then
		echo "$pid"
	fi
}

# A node this run launched counts as alive while its process lives: until
# setsid, nohup and java have exec'd, its command line does not name
# kafka.Kafka yet, and on a loaded machine that can take a while.
node_alive() { # node id -> 0 while the broker (or its launch) runs
	local f pid
	[[ -n $(node_pid "$1") ]] && return 0
	[[ $LAUNCHED == *" $1 "* ]] || return 1
	f="$(node_dir "$1")/kafka.pid"
	read -r pid <"$f" 2>/dev/null || return 1
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
	# An exited child of this script is a zombie until reaped: not alive.
	[[ $(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) != Z ]]
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; } # host port

heap_opts() {
	if [[ -n ${EOS_KAFKA_HEAP:-} ]]; then
		echo "$EOS_KAFKA_HEAP"
	elif ((NODES == 1)); then
		echo "-Xms256m -Xmx768m"
	else
		echo "-Xms256m -Xmx512m"
	fi
}

launch_node() { # node id
	local i=$1 dir pid
	dir=$(node_dir "$i")
	pid=$(node_pid "$i")
	if [[ -n $pid ]]; then
		log "node $i already running (pid $pid)"
		return 0
	fi
	local bp cp ports
	bp=$(broker_port "$i")
	cp=$(controller_port "$i")
	ports=("$bp" "$cp")
	((SECURE)) && ports+=("$(mtls_port "$i")")
	for p in "${ports[@]}"; do
		port_open "$(node_host "$i")" "$p" && die "port $p is already in use (another Kafka layout running? try: $0 status / stop, or set EOS_KAFKA_PORT)"
	done
	write_config "$i"
	format_node "$i"
	if [[ -f $dir/kafka.log ]]; then wc -l <"$dir/kafka.log" >"$dir/.logmark"; else echo 0 >"$dir/.logmark"; fi
	local prefix=()
	[[ -n ${EOS_KAFKA_NODE_PREFIX:-} ]] && read -r -a prefix <<<"${EOS_KAFKA_NODE_PREFIX//\{node\}/$i}"
	# shellcheck disable=SC2046
	setsid nohup "${prefix[@]}" "$JAVA" $(heap_opts) -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dkafka.logs.dir="$dir" \
		-Dlog4j2.configurationFile="$LAYOUT_DIR/log4j2.properties" \
		${EOS_KAFKA_JVM_OPTS:-} \
		-cp "$LIBS/*" kafka.Kafka "$dir/server.properties" \
		</dev/null >"$dir/kafka.out" 2>&1 8>&- &
	echo $! >"$dir/kafka.pid"
	LAUNCHED+=" $i "
	local mtls=""
	((SECURE)) && mtls=", mutual TLS $HOST:$(mtls_port "$i")"
	log "started node $i (pid $!) on $(node_host "$i"):$bp$mtls, controller $(node_host "$i"):$cp, log $dir/kafka.log"
}

fail_start() { # message
	local i dir
	log "error: $1"
	for i in $(selected_nodes); do
		dir=$(node_dir "$i")
		log "---- node $i: tail of $dir/kafka.log"
		tail -n 40 "$dir/kafka.log" 2>/dev/null >&2 || true
		if [[ -s $dir/kafka.out ]]; then
			log "---- node $i: $dir/kafka.out"
			tail -n 20 "$dir/kafka.out" >&2
		fi
	done
	exit 1
}

LAUNCHED=""

# Nodes started by this run log "Kafka Server started" when they are up; waiting for
# that line first avoids running admin JVMs next to a broker that is still starting.
server_started() { # node id
	local dir mark
	dir=$(node_dir "$1")
	[[ $LAUNCHED == *" $1 "* ]] || return 0
	[[ -f $dir/kafka.log ]] || return 1
	mark=$(cat "$dir/.logmark" 2>/dev/null || echo 0)
	# A log that rolled over since the launch is shorter than the mark: read it all.
	(($(wc -l <"$dir/kafka.log") >= mark)) || mark=0
	tail -n "+$((mark + 1))" "$dir/kafka.log" | grep -q 'Kafka Server started'
}

# Wait until a metadata request through each addressed node lists every addressed node
# as a live broker (BrokerApiVersionsCommand sends Metadata, then ApiVersions to each).
wait_ready() {
	local deadline=$((SECONDS + START_TIMEOUT)) i pending out want command_config=()
	((SECURE)) && command_config=(--command-config "$SECURE_DIR/admin.properties")
	for i in $(selected_nodes); do
		while ! port_open "$(node_host "$i")" "$(broker_port "$i")"; do
			node_alive "$i" || fail_start "node $i exited during startup"
			((SECONDS < deadline)) || fail_start "node $i did not open port $(broker_port "$i") within ${START_TIMEOUT}s"
			sleep 0.3
		done
		while ! server_started "$i"; do
			node_alive "$i" || fail_start "node $i exited during startup"
			((SECONDS < deadline)) || fail_start "node $i did not finish startup within ${START_TIMEOUT}s"
			sleep 0.3
		done
	done
	while :; do
		pending=""
		for i in $(selected_nodes); do
			node_alive "$i" || fail_start "node $i exited during startup"
			out=$(java_tool org.apache.kafka.tools.BrokerApiVersionsCommand \
				--bootstrap-server "$(node_host "$i"):$(broker_port "$i")" "${command_config[@]}" 2>/dev/null | grep -F '(id: ' || true)
			for want in $(selected_nodes); do
				grep -qF "(id: $want " <<<"$out" || pending+=" $want"
			done
			[[ -z $pending ]] || break
		done
		[[ -z $pending ]] && return 0
		((SECONDS < deadline)) || fail_start "broker(s)$pending not serving metadata within ${START_TIMEOUT}s"
		sleep 1
	done
}

running_version() {
	local v
	v=$(grep -ho 'Kafka version: [^ ]*' "$(node_dir "$(selected_nodes | head -n1)")/kafka.log" 2>/dev/null | tail -n1 | cut -d' ' -f3)
	echo "${v:-$VERSION}"
}

wait_gone() { # pid timeout-seconds -> 0 when the process exited
	local pid=$1 deadline=$((SECONDS + $2))
	while kill -0 "$pid" 2>/dev/null; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# ---------------------------------------------------------------- commands

cmd_start() {
	local t0=$SECONDS i
	fetch
	mkdir -p "$LAYOUT_DIR"
	exec 8>"$LAYOUT_DIR/.lock"
	flock -w $((START_TIMEOUT * 2)) 8 || die "another kafka.sh start holds $LAYOUT_DIR/.lock"
	write_log4j
	((SECURE_ARG)) && ((${#NODE_HOSTS[@]})) && die "--secure certificates name 127.0.0.1 only; unset EOS_KAFKA_NODE_HOSTS"
	((SECURE_ARG)) && setup_secure
	((SECURE)) && client_certs
	echo "$NODES $BASE_PORT" >"$CURRENT_FILE"
	# Format all nodes first (in parallel): a static quorum needs every voter's storage.
	local pids=()
	cluster_id >/dev/null
	for i in $(selected_nodes); do
		if [[ -z $(node_pid "$i") ]]; then
			write_config "$i"
			format_node "$i" &
			pids+=($!)
		fi
	done
	for p in "${pids[@]}"; do wait "$p" || exit 1; done
	for i in $(selected_nodes); do launch_node "$i"; done
	wait_ready
	log "ready in $((SECONDS - t0))s: Apache Kafka $(running_version), $NODES-node layout $LAYOUT${NODE:+ (node $NODE)}"
	echo "EOS_KAFKA_BROKERS=$(bootstrap)"
	echo "EOS_KAFKA_VERSION=$(running_version)"
	if ((SECURE)); then
		test_env >"$SECURE_DIR/secure.env"
		mtls_env >"$SECURE_DIR/mtls.env"
		chmod 600 "$SECURE_DIR/secure.env" "$SECURE_DIR/mtls.env"
		echo "EOS_KAFKA_SECURE_ENV=$SECURE_DIR/secure.env"
		echo "EOS_KAFKA_MTLS_ENV=$SECURE_DIR/mtls.env"
	fi
}

stop_nodes() { # signal(TERM|KILL)
	local sig=$1 i pid pids=() ids=()
	for i in $(selected_nodes); do
		pid=$(node_pid "$i")
		if [[ -n $pid ]]; then
			kill "-$sig" "$pid" 2>/dev/null || true
			pids+=("$pid")
			ids+=("$i")
		fi
	done
	((${#pids[@]})) || { log "no running node in layout $LAYOUT${NODE:+ (node $NODE)}"; return 0; }
	local k timeout=$STOP_TIMEOUT
	[[ $sig == KILL ]] && timeout=10
	for k in "${!pids[@]}"; do
		if ! wait_gone "${pids[$k]}" "$timeout"; then
			log "node ${ids[$k]} (pid ${pids[$k]}) still running after ${timeout}s; sending SIGKILL"
			kill -KILL "${pids[$k]}" 2>/dev/null || true
			wait_gone "${pids[$k]}" 10 || die "could not kill pid ${pids[$k]}"
		fi
		rm -f "$(node_dir "${ids[$k]}")/kafka.pid"
		log "node ${ids[$k]} stopped (SIG$sig)"
	done
}

cmd_stop() {
	stop_nodes TERM
	# A clean stop of the whole layout forgets it: the next plain start is a single node.
	if [[ -z $NODE ]]; then rm -f "$CURRENT_FILE"; fi
}

cmd_kill() { stop_nodes KILL; }

cmd_restart() {
	if ((HARD)); then stop_nodes KILL; else stop_nodes TERM; fi
	cmd_start
}

cmd_status() {
	local i pid rc=0
	if [[ ! -d $LAYOUT_DIR ]]; then
		echo "layout $LAYOUT: not created"
		return 1
	fi
	for i in $(selected_nodes); do
		pid=$(node_pid "$i")
		if [[ -n $pid ]]; then
			echo "node $i: running (pid $pid) $(node_host "$i"):$(broker_port "$i")"
		else
			echo "node $i: stopped"
			rc=1
		fi
	done
	local sec=""
	((SECURE)) && sec=" (SASL_SSL, SCRAM-SHA-512, ACLs: $0 secure-env; mutual TLS on $(mtls_bootstrap): $0 mtls-env)"
	echo "layout $LAYOUT, Kafka $VERSION, bootstrap $(bootstrap)$sec"
	return $rc
}

cmd_clean() {
	NODE="" stop_nodes TERM
	rm -rf "$LAYOUT_DIR"
	rm -f "$CURRENT_FILE"
	log "removed $LAYOUT_DIR"
}

case $CMD in
start) cmd_start ;;
stop) cmd_stop ;;
kill) cmd_kill ;;
restart) cmd_restart ;;
status) cmd_status ;;
bootstrap) bootstrap ;;
pid) for i in $(selected_nodes); do node_pid "$i"; done ;;
clean) cmd_clean ;;
fetch) fetch; echo "$LIBS" ;;
secure-env) secure_env ;;
mtls-env) mtls_env ;;
*) usage ;;
esac
