#!/usr/bin/env bash
# redis.sh — run a real Redis on loopback for eosflow's tests, without Docker.
#
#   redis.sh start            install (Debian package, once), start daemonized, wait for PONG,
#                             print its URL
#   redis.sh stop             SHUTDOWN NOSAVE, wait for the process to exit
#   redis.sh restart [--hard] stop (or SIGKILL it with --hard), start; the data is gone
#                             either way, as there is no persistence
#   redis.sh status           exit 0 when it runs
#   redis.sh url              print the URL (for EOS_REDIS_URL)
#   redis.sh pid              print the server's pid
#
# It listens on 127.0.0.1:EOS_REDIS_PORT (default 16379), without password and without
# persistence (no RDB snapshots, no AOF), so it is for tests only. Its pid file, log and
# working directory live in integration/redis/.run/ (EOS_REDIS_RUN_DIR).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN_DIR=${EOS_REDIS_RUN_DIR:-$SCRIPT_DIR/.run}
PORT=${EOS_REDIS_PORT:-16379}
PID_FILE=$RUN_DIR/redis.pid
LOG=$RUN_DIR/redis.log
URL=redis://127.0.0.1:$PORT/0

log() { printf 'redis.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
}

# install makes sure redis-server and redis-cli are there, from the distribution's package.
install() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return
	((EUID == 0)) || die "Redis is not installed; as root: apt-get install redis-server"
	command -v apt-get >/dev/null || die "redis-server is not installed and there is no apt-get; install Redis 6+ and put it on PATH"
	if ! apt-cache policy redis-server 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		log "no redis-server package known; running apt-get update"
		apt-get update -qq
	fi
	log "installing the redis-server package"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
	command -v redis-server >/dev/null || die "apt-get installed no redis-server binary"
}

cli() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }

running() {
	[[ -f $PID_FILE ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

fail_with_log() {
	[[ -f $LOG ]] && { log "last lines of $LOG:"; tail -n 30 "$LOG" >&2; }
	die "$*"
}

start() {
	if running; then
		log "already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$PORT"
		echo "$URL"
		return 0
	fi
	install
	mkdir -p "$RUN_DIR"
	rm -f "$PID_FILE"
	# A fresh log per start, so that startup errors are this start's.
	[[ -f $LOG ]] && mv -f "$LOG" "$LOG.1"
	# The package's /etc/redis/redis.conf is not read: everything is given here.
	redis-server --bind 127.0.0.1 --port "$PORT" --protected-mode yes \
		--save '' --appendonly no --dir "$RUN_DIR" \
		--daemonize yes --pidfile "$PID_FILE" --logfile "$LOG" ||
		fail_with_log "redis-server exited with status $?"
	local deadline=$((SECONDS + 30))
	until [[ $(cli ping 2>/dev/null) == PONG ]]; do
		if grep -q 'aborting' "$LOG" 2>/dev/null || { [[ -f $PID_FILE ]] && ! running; }; then
			fail_with_log "redis-server exited during startup"
		fi
		((SECONDS < deadline)) || fail_with_log "Redis not answering PING on 127.0.0.1:$PORT after 30 s"
		sleep 0.1
	done
	log "started $(redis-server --version | cut -d' ' -f1-3) pid $(cat "$PID_FILE") on 127.0.0.1:$PORT"
	echo "$URL"
}

stop() {
	local hard=${1:-0}
	if ! running; then
		log "not running"
		rm -f "$PID_FILE"
		return 0
	fi
	local pid
	pid=$(cat "$PID_FILE")
	if ((hard)); then
		kill -9 "$pid"
	else
		cli shutdown nosave >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
	fi
	local deadline=$((SECONDS + 15))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "pid $pid still running after 15 s; killing it"
			kill -9 "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	rm -f "$PID_FILE"
	log "stopped pid $pid"
}

case ${1:-} in
start) start ;;
stop) stop 0 ;;
restart)
	if [[ ${2:-} == --hard ]]; then stop 1; else stop 0; fi
	start >/dev/null
	;;
status) running ;;
url) echo "$URL" ;;
pid)
	running || die "not running on 127.0.0.1:$PORT (pid file $PID_FILE)"
	cat "$PID_FILE"
	;;
-h | --help | *) usage ;;
esac
