#!/usr/bin/env bash
# Runs each example against the brokers in EOS_BROKERS, seeding 100 records
# and stopping it after a few seconds, and checks that it printed what its
# README says. Exit status 1 names the example and shows its output.
#
#   EOS_BROKERS=127.0.0.1:9092 examples/run.sh [duration, default 10s]
#
# postgres-sink also needs the PostgreSQL in EOS_POSTGRES_URL; without it,
# it is skipped.
#
# Each example resumes where its last run committed, so a run counts only
# the records it seeded itself.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${EOS_BROKERS:?set EOS_BROKERS to the brokers to run against}"
export EOS_BROKERS
dur=${1:-10s}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/" ./examples/orders ./examples/dlq ./examples/fanout ./examples/perminute ./examples/enrich ./examples/match ./examples/postgres-sink

# example NAME ARGS... -- PATTERN...: runs example NAME with ARGS and -for,
# and fails unless every extended regexp PATTERN matches a line of its output.
example() {
	local name=$1 args=() status=0
	shift
	while [[ $1 != -- ]]; do args+=("$1"); shift; done
	shift
	echo "--- $name ${args[*]} -for $dur"
	"$dir/$name" "${args[@]}" -for "$dur" >"$dir/out" 2>"$dir/log" || status=$?
	grep -E '^(seeded|done):? ' "$dir/out" || true
	local missing=()
	for p in "$@"; do
		grep -Eq "$p" "$dir/out" || missing+=("$p")
	done
	if ((status != 0 || ${#missing[@]} > 0)); then
		echo "FAIL: $name ${args[*]}: exit status $status; no line matches: ${missing[*]}"
		echo "its output:"; cat "$dir/out"
		echo "its log (last 30 lines):"; tail -30 "$dir/log"
		exit 1
	fi
}

example orders -seed 100 -- \
	'^seeded 100 orders$' '^invoice o-[0-9]+: [a-z]+ pays [0-9.]+$' \
	'^done: 100 orders in, 53 records out, 3 dead-lettered, [0-9]+ transactions committed$'
example dlq -seed 100 -- \
	'^seeded 100 payments$' '^payment p-[0-9]+: [a-z]+ [0-9]+ cents$' '^done: 100 payments in, 10 dead-lettered$'
example dlq -replay -- \
	'^replaying payments/[0-9]+@[0-9]+ \(codec: json decode' '^done: 10 dead letters replayed$'
example fanout -seed 100 -- \
	'^seeded 100 events$' '^purchase: [a-z]+ paid [0-9]+ cents at store [0-9]+$' '^click: [a-z]+ to events-click$' \
	'^done: 100 events in, 80 routed$'
example perminute -seed 100 -- \
	'^seeded 100 orders and one closing order per shop$' '^(north|south|east|west) [0-9]{2}:[0-9]{2}-[0-9]{2}:[0-9]{2}: 5 orders$' \
	'^done: 104 orders in, 20 minutes closed, 0 late$'
example enrich -seed 100 -- \
	'^seeded 4 profiles and 100 clicks$' '^(ada|grace|edsger|barbara) \((pro|free|team)\) viewed /[a-z]+$' \
	'^done: 104 records in, 90 enriched clicks out$'
example match -seed 100 -- \
	'^seeded 100 orders and 100 payments$' '^paid o-[0-9]{6}-[0-9]+: [0-9]+ cents, [1-5]m0s after the order$' \
	'^done: 200 records in, 90 orders paid, 0 late$'
if [[ -n ${EOS_POSTGRES_URL:-} ]]; then
	example postgres-sink -seed 100 -- \
		'^seeded 100 payments$' '^done: 100 payments in, 80 rows written, 10 duplicates skipped, 10 dead-lettered$'
else
	echo "--- postgres-sink skipped: EOS_POSTGRES_URL is not set (integration/postgres/pg.sh start prints it)"
fi
echo "examples: ok"
