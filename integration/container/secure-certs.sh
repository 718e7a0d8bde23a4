#!/usr/bin/env bash
# secure-certs.sh — make the secrets of a secured broker (SASL_SSL, SCRAM-SHA-512, ACLs),
# the same files integration/kafka/kafka.sh --secure keeps in its layout:
#
#   integration/container/secure-certs.sh DIR [--force]
#
#   DIR/ca.pem          the test CA clients trust (--tls-ca, EOS_TLS_CA_FILE)
#   DIR/broker.pem      the broker's key, certificate (127.0.0.1, localhost) and the CA:
#                       Kafka's PEM keystore format
#   DIR/admin.password  the password of the super user "admin"
#   DIR/ca.key          the CA's key, only needed to sign more certificates
#   (broker.key and broker.crt are the parts of broker.pem)
#
# Mount DIR into localhost/apache-kafka and set KAFKA_SECURE_DIR to the mount point
# (see integration/container/README.md). An existing complete DIR is kept unless --force:
# a broker formatted with its admin password cannot log in with a new one.
# Needs openssl on the host; the image needs none.
set -euo pipefail

log() { printf 'secure-certs: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -ge 1 && $1 != -* ]] || { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
DIR=$1
FORCE=0
[[ ${2:-} == --force ]] && FORCE=1

command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
if ((FORCE == 0)) && [[ -f $DIR/.complete ]]; then
	log "$DIR already holds ca.pem, broker.pem and admin.password; keeping them (--force makes new ones)"
	exit 0
fi

mkdir -p "$DIR"
chmod 700 "$DIR"
rm -f "$DIR/.complete"
(
	set -e
	cd "$DIR"
	umask 077
	openssl rand -hex 16 >admin.password
	openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=eosflow test CA" \
		-keyout ca.key -out ca.pem
	openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" -keyout broker.key -out broker.csr
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >broker.ext
	openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
		-extfile broker.ext -out broker.crt
	cat broker.key broker.crt ca.pem >broker.pem
	rm -f broker.csr broker.ext ca.srl
	chmod 600 ./*
) >"$DIR/.openssl.log" 2>&1 || { cat "$DIR/.openssl.log" >&2; die "openssl could not make the certificates in $DIR"; }
rm -f "$DIR/.openssl.log"
touch "$DIR/.complete"
log "made $DIR/ca.pem, $DIR/broker.pem and $DIR/admin.password (super user admin)"
