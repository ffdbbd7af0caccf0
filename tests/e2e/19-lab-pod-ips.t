#!/usr/bin/env bash
# The lab's pods never take an address from the CNI plugin's range
# (.200-.250 of a node's /24: containers made by hand with `lab podman`
# get theirs from the plugin's own IPAM, which does not know the lab's
# pods). Pods take addresses next-fit, so a lab that has churned about 200
# pods on a node reaches that range: two rounds of 100 pods (after the
# cluster DNS pod) get there, and the second round must still fit, in the
# rest of the /24.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t19

cat >"$TMP/cluster.yaml" <<'YAML'
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec: {podCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/12, nodes: [{name: node-a}]}
YAML
"$ZH" lab up --lab $LAB -f "$TMP/cluster.yaml" >"$TMP/up" 2>&1
is $? 0 "lab up, one node"
for round in 1 2; do
	REPLICAS=100 m_deploy "r$round" node-a "" "$(m_ctr c "" sleep 100000)" >"$TMP/r$round.yaml"
	"$ZH" apply --lab $LAB -f "$TMP/r$round.yaml" >/dev/null
	wait_until 90 lab_running 101
	ok $? "round $round: 100 pods Running"
	"$ZH" lab status --lab $LAB -o json >"$TMP/st$round.json"
	jq -r '.pods[].ip' "$TMP/st$round.json" | awk -F. '$4 >= 200 && $4 <= 250' >"$TMP/in-range$round"
	is "$(wc -l <"$TMP/in-range$round")" 0 "round $round: no pod in .200-.250 ($(head -3 "$TMP/in-range$round" | tr '\n' ' '))"
	is "$(jq -r '.pods[].ip' "$TMP/st$round.json" | sort | uniq -d | wc -l)" 0 "round $round: no address given twice"
	"$ZH" delete --lab $LAB -f "$TMP/r$round.yaml" >/dev/null
	wait_until 60 sh -c "\"$ZH\" lab status --lab $LAB -o json | jq -e '[.pods[] | select(.name | startswith(\"r$round-\"))] | length == 0' >/dev/null"
	ok $? "round $round: the pods are gone"
done
# the highest address handed out in round 2 shows the allocator did reach
# past the range (else this test proves nothing)
max=$(jq -r '.pods[].ip' "$TMP/st2.json" | awk -F. '{print $4}' | sort -n | tail -1)
[ "${max:-0}" -gt 250 ]
ok $? "round 2 reached past the range (highest .$max)"
done_testing
