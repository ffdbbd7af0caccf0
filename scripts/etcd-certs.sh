#!/usr/bin/env bash
# etcd-certs.sh DIR SAN[,SAN...] — a throwaway PKI for etcd over TLS
# (docs/state-etcd.md "TLS and client certificates"), made with the openssl
# CLI (Debian package openssl), EC P-256, valid DAYS (default 1) days:
#   DIR/ca.crt ca.key           a CA of its own
#   DIR/server.crt server.key   etcd's certificate; SANs as given, e.g.
#                               IP:127.0.0.1,DNS:etcd-1; serverAuth AND
#                               clientAuth: etcd 3.4's JSON gateway dials
#                               etcd's own gRPC port with it as a client
#                               certificate, which --client-cert-auth checks
#   DIR/client.crt client.key   a client certificate (clientAuth)
# For a test or a lab, not for production (keys unencrypted, short-lived).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 DIR SAN[,SAN...]   (e.g. IP:127.0.0.1)" >&2; exit 2; }
D=$1
SAN=$2
DAYS=${DAYS:-1}
mkdir -p "$D"
cd "$D"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
key ca
openssl req -x509 -new -key ca.key -days "$DAYS" -subj "/CN=zerohop etcd CA $$" -out ca.crt
sign() {	# NAME EXTENSIONS
	key "$1"
	openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr"
	printf '%b' "$2" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$DAYS" \
		-extfile "$1.ext" -out "$1.crt" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}
sign server "subjectAltName=$SAN\nextendedKeyUsage=serverAuth,clientAuth\n"
sign client "extendedKeyUsage=clientAuth\n"
chmod 600 ./*.key
