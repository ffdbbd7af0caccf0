#!/usr/bin/env bash
# lab_conformance.sh LAB FIRST LAST [6] — the upstream NetworkPolicy cases FIRST..LAST
# (or LAB I,J,K - [6]: those cases)
# (numbers of `conformance.py list`) in a lab: up with the mesh (the node
# agents enforce every policy `zerohop apply` writes; each step waits until
# both agents have synced it), every pod probing every pod by Service
# ClusterIP and by pod IP, TAP out, lab down (also on failure).
# With 6: a dual-stack lab, the pods' servers on
# [::] and every probe over IPv6 (pod IPv6 addresses, IPv6 ClusterIPs of
# PreferDualStack Services, IPv6 ipBlocks): docs/ipv6.md "NetworkPolicy".
# Used by tests/e2e/50-netpol-conformance.t, 51-netpol-conformance.t and
# 58-netpol-v6-conformance.t.
source "$(dirname "$0")/../lib/tap.sh"
LAB=$1${ZH_TEST_LAB_SUFFIX:-} FIRST=$2 LAST=$3 FAMILY=${4:-4}
case $FIRST in *,*) CASES=$FIRST ;; *) CASES=$(seq -s, "$FIRST" "$LAST") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
TOOLS=$(dirname "$ZH")/tests/tools
[ "$(id -u)" -eq 0 ] || skip_all "needs root"
[ -x "$ZH" ] || skip_all "no $ZH (make first)"
[ -x "$TOOLS/netpol_probe" ] || skip_all "no $TOOLS/netpol_probe (make first)"
python3 -c 'import yaml' 2>/dev/null || skip_all "no python3-yaml (scripts/deps.sh)"
TMP=$(mktemp -d /tmp/zh-$LAB.XXXXXX)
cleanup() { "$ZH" lab down --lab "$LAB" >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
ECHO="$ZH echo --tcp 80 --tcp 81 --udp 80 --udp 81"
if [ "$FAMILY" = 6 ]; then
	ECHO="$ZH echo --tcp [::]:80 --tcp [::]:81 --udp [::]:80 --udp [::]:81"
fi
python3 "$HERE/conformance.py" topology --family "$FAMILY" --echo "$ECHO" >"$TMP/topology.yaml"
if ! "$ZH" lab up --lab "$LAB" -f "$TMP/topology.yaml" >"$TMP/up.log" 2>&1; then
	echo "1..1"; echo "not ok 1 - lab up"; sed 's/^/# /' "$TMP/up.log"; exit 1
fi
python3 "$HERE/conformance.py" lab --lab "$LAB" --zh "$ZH" --family "$FAMILY" \
	--probe "$TOOLS/netpol_probe" --echo "$ECHO" --cases "$CASES"
