#!/usr/bin/env bash
# lab_conformance.sh LAB FIRST LAST — the upstream NetworkPolicy cases FIRST..LAST
# (numbers of `conformance.py list`) in a lab: up with the mesh (the node
# agents enforce every policy `zerohop apply` writes; each step waits until
# both agents have synced it), every pod probing every pod by Service
# ClusterIP and by pod IP, TAP out, lab down (also on failure).
# Used by tests/e2e/50-netpol-conformance.t and 51-netpol-conformance.t.
source "$(dirname "$0")/../lib/tap.sh"
LAB=$1 FIRST=$2 LAST=$3
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
python3 "$HERE/conformance.py" topology --echo "$ECHO" >"$TMP/topology.yaml"
if ! "$ZH" lab up --lab "$LAB" -f "$TMP/topology.yaml" >"$TMP/up.log" 2>&1; then
	echo "1..1"; echo "not ok 1 - lab up"; sed 's/^/# /' "$TMP/up.log"; exit 1
fi
python3 "$HERE/conformance.py" lab --lab "$LAB" --zh "$ZH" \
	--probe "$TOOLS/netpol_probe" --echo "$ECHO" --cases "$(seq -s, "$FIRST" "$LAST")"
