#!/bin/bash
# Initialises PGDATA on first start (trust authentication, database POSTGRES_DB), then runs
# the server in the foreground as user postgres on PGPORT (default 5432). Like the official
# image, a command of "postgres -c name=value ..." passes its settings on (e.g.
# listen_addresses=127.0.0.1 on the host network); otherwise it listens on every address.
set -euo pipefail
export PGPORT=${PGPORT:-5432}
if [[ ${POSTGRES_HOST_AUTH_METHOD:-trust} != trust ]]; then
	echo "postgres-entrypoint: only POSTGRES_HOST_AUTH_METHOD=trust is supported (test image)" >&2
	exit 2
fi
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
if [[ ! -s $PGDATA/PG_VERSION ]]; then
	su postgres -c "initdb -D '$PGDATA' -U postgres --auth=trust -E UTF8 --locale=C.UTF-8" >/dev/null
	printf "host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n" >>"$PGDATA/pg_hba.conf"
	su postgres -c "pg_ctl -D '$PGDATA' -o \"-c listen_addresses='' -p $PGPORT\" -w start" >/dev/null
	if [[ -n ${POSTGRES_DB:-} && ${POSTGRES_DB} != postgres ]]; then
		su postgres -c "createdb -p $PGPORT '$POSTGRES_DB'"
	fi
	su postgres -c "pg_ctl -D '$PGDATA' -m fast -w stop" >/dev/null
fi
settings="-c listen_addresses='*'"
if [[ ${1:-} == postgres ]]; then
	shift
	settings=""
	for arg in "$@"; do settings+=" $(printf '%q' "$arg")"; done
fi
exec su postgres -c "exec postgres -D '$PGDATA' -p $PGPORT $settings"
