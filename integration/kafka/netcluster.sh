#!/usr/bin/env bash
# netcluster.sh — a kafka.sh cluster whose brokers each run in a network namespace of
# their own, joined by a bridge, so that tests can cut links, not only kill processes.
#
#   netcluster.sh start                       namespaces, bridge, then kafka.sh start --cluster N
#   netcluster.sh stop                        resume, heal, kafka.sh stop, then remove what start made
#   netcluster.sh clean                       stop, then delete the brokers' data
#   netcluster.sh status                      one line per broker with its faults; exit 0 when all run
#   netcluster.sh bootstrap                   print the bootstrap list (the brokers' namespace addresses)
#   netcluster.sh cut-clients I               drop all traffic between broker I and every non-broker
#   netcluster.sh cut-peers I                 drop all traffic between broker I and the other brokers
#   netcluster.sh isolate I                   take broker I's link down: cut from everything
#   netcluster.sh coordinator txn|group KEY   print the node id that FindCoordinator names for KEY
#   netcluster.sh cut-coordinator txn|group KEY
#                                             cut-clients on that node; print its id
#   netcluster.sh heal [I]                    undo the cuts of broker I (default: of all brokers)
#   netcluster.sh pause I                     SIGSTOP broker I, a stand-in for a long GC pause
#   netcluster.sh resume [I]                  SIGCONT broker I (default: all paused brokers)
#   netcluster.sh pid I                       print broker I's pid
#   netcluster.sh exec-client CMD [ARG...]    run CMD in the clients' namespace (for pipeline workers)
#   netcluster.sh kafka ARG...                run kafka.sh on this cluster, e.g. kafka kill --node 2
#
# Needs root, iproute2 and iptables (installed from Debian packages when missing), and
# what kafka.sh needs. Node I runs in namespace <name>-b<I> at <subnet>.(10+I); the
# clients' namespace <name>-c is <subnet>.2; the root namespace reaches every
# namespace as <subnet>.1 on bridge <name>br0. The root namespace and the clients'
# namespace are both clients. See README.md.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAFKA="$SCRIPT_DIR/kafka.sh"
NAME=${EOS_NET_NAME:-eos}
SUBNET=${EOS_NET_SUBNET:-10.77.0}
NODES=${EOS_KAFKA_NODES:-3}
PORT=${EOS_KAFKA_PORT:-9092}
RUN_ROOT=${EOS_NET_RUN_DIR:-$SCRIPT_DIR/.run/net-$NAME}

log() { printf 'netcluster.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
}

# Interface names are at most 15 characters: <name>-vb<I> leaves 8 for the name.
[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "EOS_NET_NAME must be 1-8 lower-case letters or digits, got '$NAME'"
[[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "EOS_NET_SUBNET must be the first three octets of a /24, e.g. 10.77.0"
[[ $NODES =~ ^[1-9]$ ]] || die "EOS_KAFKA_NODES must be 1..9, got '$NODES'"

BRIDGE="${NAME}br0"
CLIENT_NS="$NAME-c"
CLIENT_VETH="$NAME-vc"
CLIENT_ADDR="$SUBNET.2"
PIDS_FILE="$RUN_ROOT/clients.pids"
FORWARD_RULE=(FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$NAME netcluster.sh" -j ACCEPT)
broker_ns() { echo "$NAME-b$1"; }
broker_veth() { echo "$NAME-vb$1"; }
broker_addr() { echo "$SUBNET.$((10 + $1))"; }
broker_range() { echo "$(broker_addr 1)-$(broker_addr "$NODES")"; }
hosts() {
	local i out=""
	for ((i = 1; i <= NODES; i++)); do out+="${out:+,}$(broker_addr "$i")"; done
	echo "$out"
}

kafka() {
	EOS_KAFKA_RUN_DIR="$RUN_ROOT" EOS_KAFKA_PORT="$PORT" EOS_KAFKA_NODES="$NODES" \
		EOS_KAFKA_NODE_HOSTS="$(hosts)" EOS_KAFKA_NODE_PREFIX="ip netns exec $NAME-b{node}" "$KAFKA" "$@"
}

node_arg() { # value -> checked node id
	[[ ${1:-} =~ ^[1-9]$ ]] && (($1 <= NODES)) || die "need a broker number 1..$NODES, got '${1:-}'"
	echo "$1"
}

# ---------------------------------------------------------------- network

apt_install() { # package
	log "installing $1 (Debian package)"
	apt-get install -y -qq "$1" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$1" >/dev/null; }
}

need_tools() {
	((EUID == 0)) || die "network namespaces need root"
	command -v ip >/dev/null || apt_install iproute2
	command -v iptables >/dev/null || apt_install iptables
}

ns_exists() { [[ -e /run/netns/$1 ]]; }

add_ns() { # namespace host-side-veth address
	local ns=$1 veth=$2 addr=$3
	ns_exists "$ns" || ip netns add "$ns"
	ip -n "$ns" link set lo up
	if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
		ip link del "$veth" 2>/dev/null || true
		ip link add "$veth" type veth peer name eth0 netns "$ns"
		ip -n "$ns" addr add "$addr/24" dev eth0
	fi
	ip link set "$veth" master "$BRIDGE"
	ip link set "$veth" up
	ip -n "$ns" link set eth0 up
}

# net_up makes the bridge and the namespaces (again where missing). Where
# bridged frames pass the root namespace's iptables (br_netfilter), one rule
# lets traffic across the bridge, whatever the FORWARD policy.
net_up() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		if ip route show | grep -q "^$SUBNET\.0/24 "; then
			die "$SUBNET.0/24 is already routed here; choose another EOS_NET_SUBNET"
		fi
		ip link add "$BRIDGE" type bridge
		ip addr add "$SUBNET.1/24" dev "$BRIDGE"
	fi
	ip link set "$BRIDGE" up
	local i
	for ((i = 1; i <= NODES; i++)); do add_ns "$(broker_ns "$i")" "$(broker_veth "$i")" "$(broker_addr "$i")"; done
	add_ns "$CLIENT_NS" "$CLIENT_VETH" "$CLIENT_ADDR"
	iptables -w -C "${FORWARD_RULE[@]}" 2>/dev/null || iptables -w -I "${FORWARD_RULE[@]}"
	log "bridge $BRIDGE $SUBNET.1/24, brokers $(hosts) in $(broker_ns 1)..$(broker_ns "$NODES"), clients $CLIENT_ADDR in $CLIENT_NS"
}

# net_down removes what net_up made. A process still inside a namespace
# keeps it alive after its name is gone, so it is named here.
net_down() {
	local ns pids
	for ns in $(all_ns); do
		ns_exists "$ns" || continue
		pids=$(ip netns pids "$ns" | xargs)
		[[ -z $pids ]] || log "warning: processes still in namespace $ns: $pids (not started by this script; left alone)"
		ip netns del "$ns"
	done
	local i
	for ((i = 1; i <= NODES; i++)); do ip link del "$(broker_veth "$i")" 2>/dev/null || true; done
	ip link del "$CLIENT_VETH" 2>/dev/null || true
	ip link del "$BRIDGE" 2>/dev/null || true
	while iptables -w -C "${FORWARD_RULE[@]}" 2>/dev/null; do iptables -w -D "${FORWARD_RULE[@]}"; done
}

all_ns() {
	local i
	for ((i = 1; i <= NODES; i++)); do broker_ns "$i"; done
	echo "$CLIENT_NS"
}

# ---------------------------------------------------------------- cuts

# Each broker namespace has four chains: EOS-CLIENTS-IN/OUT and
# EOS-PEERS-IN/OUT, entered from INPUT and OUTPUT for everything but
# loopback (a broker's own address is loopback too). A cut fills a pair;
# heal flushes them, so it removes exactly the cut's rules.
CHAINS=(EOS-CLIENTS-IN EOS-CLIENTS-OUT EOS-PEERS-IN EOS-PEERS-OUT)
ipt() { # node iptables-args...
	local ns
	ns=$(broker_ns "$1")
	shift
	ip netns exec "$ns" iptables -w "$@"
}

ensure_chains() { # node
	local c
	for c in "${CHAINS[@]}"; do ipt "$1" -N "$c" 2>/dev/null || true; done
	ipt "$1" -C INPUT ! -i lo -j EOS-CLIENTS-IN 2>/dev/null || ipt "$1" -A INPUT ! -i lo -j EOS-CLIENTS-IN
	ipt "$1" -C INPUT ! -i lo -j EOS-PEERS-IN 2>/dev/null || ipt "$1" -A INPUT ! -i lo -j EOS-PEERS-IN
	ipt "$1" -C OUTPUT ! -o lo -j EOS-CLIENTS-OUT 2>/dev/null || ipt "$1" -A OUTPUT ! -o lo -j EOS-CLIENTS-OUT
	ipt "$1" -C OUTPUT ! -o lo -j EOS-PEERS-OUT 2>/dev/null || ipt "$1" -A OUTPUT ! -o lo -j EOS-PEERS-OUT
}

need_net() { ns_exists "$(broker_ns "$1")" || die "namespace $(broker_ns "$1") does not exist; run '$0 start' first"; }

cut_broker() { # node clients|peers
	local i=$1 kind=$2 neg=() up
	need_net "$i"
	ensure_chains "$i"
	[[ $kind == clients ]] && neg=("!")
	up=${kind^^}
	ipt "$i" -F "EOS-$up-IN"
	ipt "$i" -F "EOS-$up-OUT"
	ipt "$i" -A "EOS-$up-IN" -m iprange "${neg[@]}" --src-range "$(broker_range)" -j DROP
	ipt "$i" -A "EOS-$up-OUT" -m iprange "${neg[@]}" --dst-range "$(broker_range)" -j DROP
	log "broker $i ($(broker_addr "$i")) cut from its $kind"
}

cut_active() { # node clients|peers -> 0 when the cut's rules are in place
	local up=${2^^}
	[[ $(ipt "$1" -S "EOS-$up-IN" 2>/dev/null | grep -c -- '-j DROP') -gt 0 ]]
}

link_down() { # node -> 0 when its link is administratively down
	local flags
	flags=$(ip -o link show dev "$(broker_veth "$1")" 2>/dev/null | sed -n 's/^[^<]*<\([^>]*\)>.*/\1/p')
	[[ ,$flags, != *,UP,* ]]
}

isolate() { # node
	need_net "$1"
	ip link set "$(broker_veth "$1")" down
	log "broker $1 ($(broker_addr "$1")) isolated: link $(broker_veth "$1") down"
}

heal() { # node
	local c
	ns_exists "$(broker_ns "$1")" || return 0
	for c in "${CHAINS[@]}"; do ipt "$1" -F "$c" 2>/dev/null || true; done
	ip link set "$(broker_veth "$1")" up 2>/dev/null || true
	log "broker $1 healed"
}

# ---------------------------------------------------------------- processes

broker_pid() { kafka pid --node "$1"; }

proc_state() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }

paused() { # node -> 0 when its broker is stopped by a signal
	local pid
	pid=$(broker_pid "$1")
	[[ -n $pid && $(proc_state "$pid") == T ]]
}

signal_broker() { # node STOP|CONT
	local pid want=T deadline=$((SECONDS + 10))
	pid=$(broker_pid "$1")
	[[ -n $pid ]] || die "broker $1 is not running"
	kill "-$2" "$pid"
	[[ $2 == CONT ]] && want=""
	while :; do
		if [[ -n $want && $(proc_state "$pid") == T ]] || [[ -z $want && $(proc_state "$pid") != T ]]; then break; fi
		((SECONDS < deadline)) || die "broker $1 (pid $pid) is in state $(proc_state "$pid") after SIG$2"
		sleep 0.1
	done
	log "broker $1 (pid $pid) SIG$2: state $(proc_state "$pid")"
}

# exec-client records its own pid before it becomes CMD, so stop can end
# what it started, by pid, and nothing else.
exec_client() {
	(($#)) || die "exec-client needs a command"
	ns_exists "$CLIENT_NS" || die "namespace $CLIENT_NS does not exist; run '$0 start' first"
	mkdir -p "$RUN_ROOT"
	echo $$ >>"$PIDS_FILE"
	exec ip netns exec "$CLIENT_NS" "$@"
}

kill_clients() {
	[[ -f $PIDS_FILE ]] || return 0
	local pid
	while read -r pid; do
		[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || continue
		[[ $(ip netns identify "$pid" 2>/dev/null) == "$CLIENT_NS" ]] || continue
		kill -KILL "$pid" 2>/dev/null && log "killed client process $pid"
	done <"$PIDS_FILE"
	rm -f "$PIDS_FILE"
}

# ---------------------------------------------------------------- coordinators

FINDCOORD="$RUN_ROOT/findcoord"

# healthy_bootstrap lists the brokers a client can reach now: the lookup
# must not wait on a broker that is cut or paused.
healthy_bootstrap() {
	local i out=""
	for ((i = 1; i <= NODES; i++)); do
		cut_active "$i" clients || link_down "$i" || paused "$i" && continue
		out+="${out:+,}$(broker_addr "$i"):$((PORT + i - 1))"
	done
	[[ -n $out ]] || die "every broker is cut or paused; heal one first"
	echo "$out"
}

coordinator() { # txn|group key
	[[ ${1:-} == txn || ${1:-} == group ]] && [[ -n ${2:-} ]] || die "usage: $0 coordinator txn|group KEY"
	if [[ ! -x $FINDCOORD || $SCRIPT_DIR/findcoord/main.go -nt $FINDCOORD ]]; then
		command -v go >/dev/null || die "go is needed to build $SCRIPT_DIR/findcoord"
		mkdir -p "$RUN_ROOT"
		(cd "$SCRIPT_DIR/findcoord" && go build -o "$FINDCOORD" .) || die "cannot build findcoord"
	fi
	"$FINDCOORD" -brokers "$(healthy_bootstrap)" "$1" "$2"
}

# ---------------------------------------------------------------- commands

cmd_start() {
	need_tools
	mkdir -p "$RUN_ROOT"
	net_up
	kafka start --cluster "$NODES"
}

cmd_stop() {
	local i
	need_tools
	for ((i = 1; i <= NODES; i++)); do
		if paused "$i"; then kill -CONT "$(broker_pid "$i")"; fi
		heal "$i"
	done
	kafka stop
	kill_clients
	net_down
	log "stopped; namespaces, bridge and rules removed"
}

cmd_status() {
	local i pid line rc=0 faults
	for ((i = 1; i <= NODES; i++)); do
		pid=$(broker_pid "$i")
		if [[ -n $pid ]]; then line="node $i: running (pid $pid)"; else line="node $i: stopped"; rc=1; fi
		faults=""
		if ns_exists "$(broker_ns "$i")"; then
			paused "$i" && faults+=" paused"
			cut_active "$i" clients && faults+=" cut-from-clients"
			cut_active "$i" peers && faults+=" cut-from-peers"
			link_down "$i" && faults+=" isolated"
		else
			faults=" no-namespace"
			rc=1
		fi
		echo "$line $(broker_addr "$i"):$((PORT + i - 1)) in $(broker_ns "$i"), faults:${faults:- none}"
	done
	if ns_exists "$CLIENT_NS"; then echo "clients: $CLIENT_ADDR in $CLIENT_NS"; else echo "clients: no namespace"; fi
	return $rc
}

CMD=${1:-}
[[ -n $CMD ]] || usage
shift
case $CMD in
cut-clients | cut-peers | isolate | pause | pid) n=$(node_arg "${1:-}") ;;
heal | resume) if (($#)); then n=$(node_arg "$1"); else n=""; fi ;;
esac
case $CMD in
start) cmd_start ;;
stop) cmd_stop ;;
clean) cmd_stop; kafka clean ;;
status) cmd_status ;;
bootstrap) kafka bootstrap ;;
cut-clients) cut_broker "$n" clients ;;
cut-peers) cut_broker "$n" peers ;;
isolate) isolate "$n" ;;
coordinator) coordinator "$@" ;;
cut-coordinator)
	id=$(coordinator "$@")
	n=$(node_arg "$id")
	cut_broker "$n" clients
	log "broker $n is the $1 coordinator of '$2'"
	echo "$n"
	;;
heal) for i in ${n:-$(seq 1 "$NODES")}; do heal "$i"; done ;;
pause) signal_broker "$n" STOP ;;
resume)
	if [[ -n $n ]]; then
		signal_broker "$n" CONT
	else
		for ((i = 1; i <= NODES; i++)); do if paused "$i"; then signal_broker "$i" CONT; fi; done
	fi
	;;
pid) broker_pid "$n" ;;
exec-client) exec_client "$@" ;;
kafka) kafka "$@" ;;
*) usage ;;
esac
