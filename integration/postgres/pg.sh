#!/usr/bin/env bash
# pg.sh — run a real PostgreSQL on loopback for eosflow's tests, without Docker.
#
#   pg.sh start            install (Debian package, once), initdb (once), start, wait until it
#                          accepts connections, create database eosflow, print its URL
#   pg.sh stop             fast shutdown (sessions are ended, data is flushed)
#   pg.sh restart [--hard] stop (or crash it with --hard: immediate shutdown, recovery on start), start
#   pg.sh status           exit 0 when it runs
#   pg.sh url              print the URL (for EOS_POSTGRES_URL)
#   pg.sh pid              print the postmaster's pid (its backends share its process group)
#   pg.sh clean            stop and delete the data directory
#
# It listens on 127.0.0.1:EOS_PG_PORT (default 15432) with trust authentication, so it is
# for tests only. The data directory, unix socket and log live in integration/postgres/.run/
# (EOS_PG_RUN_DIR); when the postgres user cannot reach that directory (a checkout in
# /root), in ${TMPDIR:-/tmp}/eosflow-postgres-PORT. PostgreSQL refuses to run as root:
# as root the server runs as the postgres user the package creates.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PORT=${EOS_PG_PORT:-15432}
DB=eosflow
URL="postgres://postgres@127.0.0.1:$PORT/$DB?sslmode=disable"
START_TIMEOUT=${EOS_PG_START_TIMEOUT:-60}

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
}

# as runs a command as the server's owner: the postgres user when we are root.
as() {
	if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi
}

# bindir prints the newest installed server's bin directory, if any.
bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
	[[ -n $d && -x $d/initdb ]] && echo "$d"
}

# install makes sure the server binaries are there, from the distribution's package.
install() {
	bindir >/dev/null && return
	((EUID == 0)) || die "PostgreSQL is not installed; as root: apt-get install postgresql"
	command -v apt-get >/dev/null || die "PostgreSQL is not installed and there is no apt-get; install PostgreSQL 13+ under /usr/lib/postgresql/VERSION/bin"
	if ! apt-cache policy postgresql 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		log "no postgresql package known; running apt-get update"
		apt-get update -qq
	fi
	# The package would create (and where it can, start) a cluster "main" on
	# the default port 5432; this script runs its own, so ask for none.
	if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
		mkdir -p /etc/postgresql-common/createcluster.d
		echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/eosflow.conf
	fi
	log "installing the postgresql package"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
	bindir >/dev/null || die "apt-get installed no PostgreSQL server under /usr/lib/postgresql"
}

# run_dir prints the run directory: EOS_PG_RUN_DIR, else .run next to this script when the
# server's user can reach it, else one under TMPDIR.
run_dir() {
	if [[ -n ${EOS_PG_RUN_DIR:-} ]]; then echo "$EOS_PG_RUN_DIR"; return; fi
	if ((EUID != 0)) || runuser -u postgres -- test -x "$SCRIPT_DIR" 2>/dev/null; then
		echo "$SCRIPT_DIR/.run"
	else
		echo "${TMPDIR:-/tmp}/eosflow-postgres-$PORT"
	fi
}
RUN_DIR=$(run_dir)
DATA=$RUN_DIR/data
LOG=$RUN_DIR/postgres.log

running() {
	local bin
	bin=$(bindir) || return 1
	[[ -f $DATA/postmaster.pid ]] && as "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

fail_with_log() {
	[[ -f $LOG ]] && { log "last lines of $LOG:"; tail -n 30 "$LOG" >&2; }
	die "$*"
}

start() {
	if running; then
		log "already running on 127.0.0.1:$PORT (data $DATA)"
		echo "$URL"
		return 0
	fi
	install
	local bin
	bin=$(bindir)
	mkdir -p "$RUN_DIR"
	((EUID == 0)) && chown postgres: "$RUN_DIR"
	chmod 700 "$RUN_DIR"
	if [[ ! -f $DATA/PG_VERSION ]]; then
		rm -rf "$DATA"
		log "initdb into $DATA"
		as "$bin/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --no-instructions >"$RUN_DIR/initdb.log" 2>&1 ||
			{ cat "$RUN_DIR/initdb.log" >&2; die "initdb failed"; }
	fi
	# No fsync: the data of a test server is disposable, and a crashed server process
	# (restart --hard) loses nothing the OS already has. Commits stay synchronous, so a
	# committed transaction has reached the OS and survives that crash, WAL recovery
	# included; synchronous_commit=off would lose the last ones.
	as "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$START_TIMEOUT" -o "-p $PORT -k $RUN_DIR \
		-c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
		-c max_connections=200" start >/dev/null 2>&1 ||
		fail_with_log "PostgreSQL did not start on 127.0.0.1:$PORT within ${START_TIMEOUT}s"
	local psql=("$bin/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1)
	if [[ $(as "${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'") != 1 ]]; then
		as "${psql[@]}" -c "CREATE DATABASE $DB" || fail_with_log "cannot create database $DB"
	fi
	log "started $("$bin/postgres" --version) on 127.0.0.1:$PORT (data $DATA)"
	echo "$URL"
}

stop() {
	local mode=${1:-fast}
	if ! running; then
		log "not running"
		return 0
	fi
	as "$(bindir)/pg_ctl" -D "$DATA" -m "$mode" -w -t 30 stop >/dev/null 2>&1 || fail_with_log "pg_ctl stop -m $mode failed"
	log "stopped ($mode)"
}

case ${1:-} in
start) start ;;
stop) stop fast ;;
restart)
	if [[ ${2:-} == --hard ]]; then stop immediate; else stop fast; fi
	start >/dev/null
	;;
status) running ;;
url) echo "$URL" ;;
pid)
	running || die "not running on 127.0.0.1:$PORT (data $DATA)"
	head -n1 "$DATA/postmaster.pid"
	;;
clean)
	stop fast
	rm -rf "$DATA"
	log "deleted $DATA"
	;;
-h | --help | *) usage ;;
esac
