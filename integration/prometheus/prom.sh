#!/usr/bin/env bash
# prom.sh — run a real Prometheus on loopback that scrapes one eosflow pipeline.
#
#   prom.sh start [TARGET]   install (Debian package, once), write a scrape config for
#                            TARGET (host:port serving /metrics; default
#                            EOS_PROMETHEUS_TARGET or 127.0.0.1:19464), start, wait until
#                            ready, print the HTTP API's base URL
#   prom.sh stop             SIGTERM, wait, SIGKILL after 15 s
#   prom.sh url              print the base URL (for EOS_PROMETHEUS_URL)
#
# It listens on 127.0.0.1:EOS_PROMETHEUS_PORT (default 19090) and scrapes every second.
# Config, data, log and pid file live in integration/prometheus/.run/ (EOS_PROMETHEUS_RUN_DIR).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN_DIR=${EOS_PROMETHEUS_RUN_DIR:-$SCRIPT_DIR/.run}
PORT=${EOS_PROMETHEUS_PORT:-19090}
TARGET_DEFAULT=${EOS_PROMETHEUS_TARGET:-127.0.0.1:19464}
PID_FILE=$RUN_DIR/prometheus.pid
URL=http://127.0.0.1:$PORT

log() { printf 'prom.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
}

# install makes sure the prometheus binary is there, from the distribution's package.
install() {
	command -v prometheus >/dev/null && return
	command -v apt-get >/dev/null || die "prometheus is not installed and there is no apt-get; install Prometheus 2.x and put it on PATH"
	if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		log "no prometheus package known; running apt-get update"
		apt-get update -qq
	fi
	log "installing the prometheus package"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
	command -v prometheus >/dev/null || die "apt-get installed no prometheus binary"
}

running() {
	[[ -f $PID_FILE ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

start() {
	local target=${1:-$TARGET_DEFAULT}
	[[ $target == *:* ]] || die "target $target: want host:port of a /metrics endpoint"
	if running; then
		die "already running (pid $(cat "$PID_FILE")); stop it first"
	fi
	install
	mkdir -p "$RUN_DIR/data"
	cat >"$RUN_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: eosflow
    # eosflow's own instance label (the instance_id) is kept; without this
    # Prometheus' target label wins and it becomes exported_instance.
    honor_labels: true
    static_configs:
      - targets: ['$target']
EOF
	prometheus --config.file="$RUN_DIR/prometheus.yml" --storage.tsdb.path="$RUN_DIR/data" \
		--web.listen-address="127.0.0.1:$PORT" >"$RUN_DIR/prometheus.log" 2>&1 &
	echo $! >"$PID_FILE"
	local deadline=$((SECONDS + 60))
	until curl -fsS "$URL/-/ready" >/dev/null 2>&1; do
		running || die "prometheus exited during startup; see $RUN_DIR/prometheus.log"
		((SECONDS < deadline)) || die "prometheus not ready after 60 s; see $RUN_DIR/prometheus.log"
		sleep 0.5
	done
	log "started pid $(cat "$PID_FILE") on $URL, scraping $target every second"
	echo "$URL"
}

stop() {
	running || { log "not running"; rm -f "$PID_FILE"; return 0; }
	local pid
	pid=$(cat "$PID_FILE")
	kill "$pid"
	local deadline=$((SECONDS + 15))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "pid $pid still running after 15 s; killing it"
			kill -9 "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	rm -f "$PID_FILE"
	log "stopped pid $pid"
}

case ${1:-} in
start) shift; start "$@" ;;
stop) stop ;;
url) echo "$URL" ;;
*) usage ;;
esac
