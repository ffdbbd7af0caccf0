#!/usr/bin/env bash
# 53-netpol-lab-sample.t — the real-traffic sample of the random property
# cases: the first 10 scenarios of the seeded generator (random labels, named
# ports, selectors, ipBlocks, ranges, policyTypes) each in a fresh lab, pods
# on both nodes, ~45 pod -> pod TCP/UDP probes each sent for real and
# compared with the independent reference evaluator. The lab's node agents
# enforce the policies (`zerohop apply`). All 10,000 cases run on
# the compiled maps (test_property) and on the kernel programs
# (test_bpf_prop); this is the part that goes through real sockets.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t53
lab_test_tools netpol_probe
python3 -c 'import yaml' 2>/dev/null || skip_all "no python3-yaml (scripts/deps.sh)"
python3 "$ROOT/tests/netpol/lab_sample.py" --lab $LAB --zh "$ZH" \
	--probe "$TOOLS/netpol_probe" --seed "${ZH_NETPOL_SEED:-20261202}" --scenarios 10
