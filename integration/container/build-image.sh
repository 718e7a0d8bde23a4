#!/usr/bin/env bash
# build-image.sh — build the Apache Kafka container image locally, without any registry.
#
#   integration/container/build-image.sh [--force] [--sinks]
#
# 1. installs podman, runc, debootstrap (and uidmap, fuse-overlayfs, slirp4netns) if missing
# 2. configures podman for this machine kind (/etc/containers/containers.conf)
# 3. builds a Debian bookworm rootfs with a Java 17 JRE via debootstrap and imports it as
#    localhost/debian-jre17:local
# 4. builds localhost/apache-kafka:<version> (also :local) from Containerfile, with the
#    broker jars that integration/kafka/kafka.sh caches
# 5. with --sinks, also builds localhost/postgres:15-local and localhost/redis:7-local from
#    sinks/ (PostgreSQL 15 and Redis 7 from Debian, run like the official postgres and redis
#    images), for the testcontainers-go requests of tools/servertest (EOS_POSTGRES_IMAGE,
#    EOS_REDIS_IMAGE)
# Existing images are reused; --force rebuilds the Kafka image (EOS_REBUILD_BASE=1: the base too).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAFKA_SH="$SCRIPT_DIR/../kafka/kafka.sh"
BASE_IMAGE=${EOS_BASE_IMAGE:-localhost/debian-jre17:local}
IMAGE_REPO=${EOS_KAFKA_IMAGE_REPO:-localhost/apache-kafka}
SUITE=bookworm
FORCE=0
SINKS=0
for arg in "$@"; do
	case $arg in
	--force) FORCE=1 ;;
	--sinks) SINKS=1 ;;
	*) printf 'build-image: unknown argument %s (use --force, --sinks)\n' "$arg" >&2; exit 2 ;;
	esac
done
POSTGRES_IMAGE=localhost/postgres:15-local
REDIS_IMAGE=localhost/redis:7-local

log() { printf 'build-image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
T_START=$SECONDS
declare -a TIMINGS=()
timed() { # label command...
	local t0=$SECONDS
	"${@:2}"
	TIMINGS+=("$1: $((SECONDS - t0))s")
}

[[ $(id -u) == 0 ]] || die "run as root (installs packages and uses rootful podman)"

# ---------------------------------------------------------------- packages

install_packages() {
	local missing=() pkg
	command -v podman >/dev/null || missing+=(podman)
	command -v runc >/dev/null || missing+=(runc)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	command -v newuidmap >/dev/null || missing+=(uidmap)
	command -v fuse-overlayfs >/dev/null || missing+=(fuse-overlayfs)
	command -v slirp4netns >/dev/null || missing+=(slirp4netns)
	command -v curl >/dev/null || missing+=(curl)
	((${#missing[@]})) || return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	for pkg in podman runc debootstrap; do command -v "$pkg" >/dev/null || die "$pkg still missing"; done
}

# ---------------------------------------------------------------- podman configuration

configure_podman() {
	local conf=/etc/containers/containers.conf
	mkdir -p /etc/containers
	if [[ -f $conf ]] && grep -Eq '^[[:space:]]*(default_ulimits|cgroup_manager|runtime)[[:space:]]*=' "$conf"; then
		log "$conf already configured; leaving it alone"
		return 0
	fi
	if [[ -s $conf ]] && grep -Eq '^[[:space:]]*\[(containers|engine)\]' "$conf"; then
		# Insert the keys under the existing tables instead of duplicating them.
		cp "$conf" "$conf.bak"
		awk '
			/^[[:space:]]*\[containers\]/ { print; print "default_ulimits = []"; c = 1; next }
			/^[[:space:]]*\[engine\]/ { print; print "cgroup_manager = \"cgroupfs\""; print "runtime = \"runc\""; e = 1; next }
			{ print }
			END {
				if (!c) { print ""; print "[containers]"; print "default_ulimits = []" }
				if (!e) { print ""; print "[engine]"; print "cgroup_manager = \"cgroupfs\""; print "runtime = \"runc\"" }
			}' "$conf.bak" >"$conf"
	else
		cat >>"$conf" <<'CONF'
# Written by eosflow integration/container/build-image.sh: no systemd, no ulimit
# changes and runc on this machine kind.
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
	fi
	log "configured $conf"
}

# ---------------------------------------------------------------- base image

debian_mirror() {
	local m=""
	if [[ -n ${EOS_DEBIAN_MIRROR:-} ]]; then echo "$EOS_DEBIAN_MIRROR"; return; fi
	# deb822 sources: the URIs of the stanza whose Suites include the release itself.
	m=$(awk -v suite="$SUITE" '
		/^URIs:/ { uris = $2 }
		/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = uris }
		/^$/ { uris = "" }
		END { print found }' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
	if [[ -z $m ]]; then
		m=$(grep -hE "^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[a-z]+://[^ ]+[[:space:]]+$SUITE[[:space:]]" \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			sed -E 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{ print $1; exit }')
	fi
	echo "${m:-http://deb.debian.org/debian}"
}

build_base() {
	if [[ ${EOS_REBUILD_BASE:-0} != 1 ]] && podman image exists "$BASE_IMAGE"; then
		log "$BASE_IMAGE exists; reusing it"
		return 0
	fi
	local dir mirror
	dir=$(mktemp -d /var/tmp/eosflow-rootfs.XXXXXX)
	mirror=$(debian_mirror)
	log "debootstrap $SUITE (minbase + openjdk-17-jre-headless) from $mirror into $dir"
	timed "debootstrap" debootstrap --variant=minbase --include=openjdk-17-jre-headless \
		"$SUITE" "$dir" "$mirror" >"$dir.log" 2>&1 || { tail -n 30 "$dir.log" >&2; rm -rf "$dir"; die "debootstrap failed"; }
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
	[[ -e $dir/usr/bin/java ]] || { rm -rf "$dir"; die "no /usr/bin/java in the new rootfs"; }
	log "importing the rootfs ($(du -sh "$dir" | cut -f1)) as $BASE_IMAGE"
	timed "import base" bash -c "tar -C '$dir' -c . | podman import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' \
		--change 'CMD [\"/bin/bash\"]' - '$BASE_IMAGE' >/dev/null 2>&1"
	rm -rf "$dir" "$dir.log"
	local jv
	jv=$(podman run --rm --network host "$BASE_IMAGE" java -version 2>&1) ||
		die "java does not run in $BASE_IMAGE: $jv"
	log "$BASE_IMAGE: ${jv%%$'\n'*}"
}

# ---------------------------------------------------------------- Kafka image

build_kafka() {
	local libs version ctx
	libs=$("$KAFKA_SH" fetch | tail -n1)
	[[ -d $libs ]] || die "kafka.sh fetch did not produce a libs folder"
	version=$(basename "$(dirname "$libs")")
	version=${version#kafka-}
	local image="$IMAGE_REPO:$version"
	if ((FORCE == 0)) && podman image exists "$image"; then
		podman tag "$image" "$IMAGE_REPO:local"
		log "$image exists; reusing it (--force rebuilds)"
		IMAGE=$image
		return 0
	fi
	ctx=$(mktemp -d /var/tmp/eosflow-kafka-ctx.XXXXXX)
	# Hard links when the cache is on the same file system, copies otherwise.
	cp -al "$libs" "$ctx/libs" 2>/dev/null || cp -a "$libs" "$ctx/libs"
	cp "$SCRIPT_DIR/Containerfile" "$SCRIPT_DIR/entrypoint.sh" "$SCRIPT_DIR/kafka-run-class.sh" "$ctx/"
	cp -r "$SCRIPT_DIR/config" "$ctx/config"
	mkdir -p "$ctx/bin"
	# Script names of the Kafka distribution for the classes the tests and health checks use.
	local spec name class
	for spec in \
		kafka-topics.sh=org.apache.kafka.tools.TopicCommand \
		kafka-transactions.sh=org.apache.kafka.tools.TransactionsCommand \
		kafka-consumer-groups.sh=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
		kafka-broker-api-versions.sh=org.apache.kafka.tools.BrokerApiVersionsCommand \
		kafka-metadata-quorum.sh=org.apache.kafka.tools.MetadataQuorumCommand \
		kafka-configs.sh=org.apache.kafka.tools.ConfigCommand \
		kafka-console-producer.sh=org.apache.kafka.tools.ConsoleProducer \
		kafka-console-consumer.sh=org.apache.kafka.tools.consumer.ConsoleConsumer \
		kafka-get-offsets.sh=org.apache.kafka.tools.GetOffsetShell \
		kafka-storage.sh=kafka.tools.StorageTool; do
		name=${spec%%=*}
		class=${spec#*=}
		printf '#!/bin/sh\nexec /opt/kafka/bin/kafka-run-class.sh %s "$@"\n' "$class" >"$ctx/bin/$name"
	done
	chmod 755 "$ctx/bin"/* "$ctx/entrypoint.sh" "$ctx/kafka-run-class.sh"
	log "building $image from $SCRIPT_DIR/Containerfile"
	timed "build kafka image" podman build -q --network host -f "$ctx/Containerfile" \
		--build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg KAFKA_VERSION="$version" \
		-t "$image" -t "$IMAGE_REPO:local" "$ctx" >/dev/null || { rm -rf "$ctx"; die "podman build failed"; }
	rm -rf "$ctx"
	IMAGE=$image
}

# ---------------------------------------------------------------- sink images

build_sink() { # image containerfile
	# Always built: podman's layer cache makes an unchanged image a matter of
	# seconds, and an edited Containerfile is never masked by an old image.
	log "building $1 from $SCRIPT_DIR/sinks/$2"
	timed "build $1" podman build -q --network host -f "$SCRIPT_DIR/sinks/$2" \
		--build-arg BASE_IMAGE="$BASE_IMAGE" -t "$1" "$SCRIPT_DIR/sinks" >/dev/null || die "podman build of $1 failed"
}

timed "packages" install_packages
configure_podman
build_base
IMAGE=""
build_kafka
if ((SINKS)); then
	build_sink "$POSTGRES_IMAGE" Containerfile.postgres
	build_sink "$REDIS_IMAGE" Containerfile.redis
fi
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^($BASE_IMAGE|$IMAGE_REPO:|$POSTGRES_IMAGE|$REDIS_IMAGE)" >&2 || true
log "timings: ${TIMINGS[*]:-}; total $((SECONDS - T_START))s"
echo "$IMAGE"
