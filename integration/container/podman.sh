#!/usr/bin/env bash
# podman.sh — a Docker-compatible API socket served by podman, for testcontainers-go
# and docker / docker compose clients on a machine without a Docker engine.
#
#   integration/container/podman.sh start    start the service (if needed), wait until it answers
#   integration/container/podman.sh stop     stop it
#   integration/container/podman.sh status   exit 0 when the socket answers
#   integration/container/podman.sh env      print the variables clients need
#
# EOS_PODMAN_SOCK overrides the socket path (default /run/eosflow-podman.sock).
set -euo pipefail

SOCK=${EOS_PODMAN_SOCK:-/run/eosflow-podman.sock}
PIDFILE=${SOCK%.sock}.pid
LOGFILE=${SOCK%.sock}.log
TIMEOUT=${EOS_PODMAN_START_TIMEOUT:-30}

log() { printf 'podman.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ping_ok() { [[ -S $SOCK ]] && [[ $(curl -s -m 2 --unix-socket "$SOCK" http://d/_ping 2>/dev/null) == OK ]]; }

service_pid() {
	local pid
	[[ -f $PIDFILE ]] || return 0
	read -r pid <"$PIDFILE" || return 0
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && grep -qa 'system' "/proc/$pid/cmdline" 2>/dev/null; then
		echo "$pid"
	fi
}

print_env() {
	echo "DOCKER_HOST=unix://$SOCK"
	echo "TESTCONTAINERS_RYUK_DISABLED=true"
}

cmd_start() {
	command -v podman >/dev/null || die "podman is not installed (run build-image.sh or apt-get install podman runc)"
	command -v curl >/dev/null || die "curl is not installed"
	if ping_ok; then
		log "already serving on $SOCK"
		print_env
		return 0
	fi
	[[ -z $(service_pid) ]] || die "podman service (pid $(service_pid)) runs but $SOCK does not answer; see $LOGFILE"
	mkdir -p "$(dirname "$SOCK")"
	local attempt
	for attempt in 1 2; do
		launch && break
		((attempt < 2)) || die "podman system service exited twice; see $LOGFILE"
		log "podman system service exited before it answered; starting it once more"
	done
	log "serving the Docker API on $SOCK (pid $(service_pid), log $LOGFILE)"
	print_env
}

# launch starts the service and waits for its socket. It watches the pid it
# started with kill -0, not service_pid: until the child has exec'd podman, its
# cmdline is this script's, and a check on it reads a starting service as dead.
launch() {
	rm -f "$SOCK"
	setsid nohup podman system service --time=0 "unix://$SOCK" </dev/null >"$LOGFILE" 2>&1 &
	local pid=$!
	echo "$pid" >"$PIDFILE"
	local deadline=$((SECONDS + TIMEOUT))
	until ping_ok; do
		if ! kill -0 "$pid" 2>/dev/null; then
			# setsid forks when it leads a process group (a shell with job
			# control): the pid above exits, the service runs on.
			pid=$(pgrep -f "podman system service --time=0 unix://$SOCK" | head -n 1 || true)
			if [[ -z $pid ]]; then
				tail -n 20 "$LOGFILE" >&2
				return 1
			fi
			echo "$pid" >"$PIDFILE"
		fi
		((SECONDS < deadline)) || { tail -n 20 "$LOGFILE" >&2; die "$SOCK did not answer within ${TIMEOUT}s"; }
		sleep 0.2
	done
}

cmd_stop() {
	local pid
	pid=$(service_pid)
	if [[ -z $pid ]]; then
		log "not running"
		rm -f "$PIDFILE"
		return 0
	fi
	kill -TERM "$pid"
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
	rm -f "$PIDFILE" "$SOCK"
	log "stopped (pid $pid); containers it started keep running: podman ps"
}

cmd_status() {
	if ping_ok; then
		echo "podman API on $SOCK answers (pid $(service_pid))"
	else
		echo "podman API on $SOCK is not running"
		return 1
	fi
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) print_env ;;
*) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
