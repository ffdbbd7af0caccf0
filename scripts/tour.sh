#!/usr/bin/env bash
# The five-minute tour of README.md, run for real by `make demo`.
# Brings a lab named "tour" up, shows what the mesh does, and takes it down
# again (also on failure or Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
Z=${ZH:-$PWD/build/zerohop}
export ZH_LAB=${ZH_LAB:-tour}
zerohop() { "$Z" "$@"; }
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
trap '"$Z" lab down >/dev/null 2>&1 || true' EXIT

"$Z" lab down >/dev/null 2>&1 || true
step zerohop lab up -f examples/lab/cluster.yaml -f examples/lab/echo.yaml
step zerohop lab status
step zerohop get services
step zerohop get endpoints
step zerohop lab exec client -- curl -s http://echo/
echo
printf '\n\033[1m$ # 30 new connections to the Service: which pod answered?\033[0m\n'
for i in $(seq 30); do zerohop lab exec client -- curl -s http://echo/ | jq -r .hostname; done | sort | uniq -c
step zerohop apply -f examples/manifests/flaskapp-split.yaml
sleep 1
printf '\n\033[1m$ # 300 requests to flaskapp, split 1 : 500m between v1 and v2\033[0m\n'
for i in $(seq 300); do zerohop lab exec client -- curl -s http://flaskapp/ | jq -r .hostname | sed 's/-[0-9a-f]*-[a-z0-9]*$//'; done | sort | uniq -c
step zerohop lab exec client -- "$Z" bench -c 16 -t 3s 'http://echo/?size=1024'
step zerohop get stats
step zerohop lab down
trap - EXIT
