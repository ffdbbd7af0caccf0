# lab_test.sh — shared set-up of the tests that run a lab (16, 30–34, 54–56).
# Source after tap.sh:
#	lab_test_setup LAB [COMMAND...]
# skips the test unless run as root with $ZH built and python3, jq and each
# COMMAND on the PATH; sets
#	LAB	the lab's name
#	PROBE	tests/bpf/lib/lbprobe.py (the connection prober run in pods)
#	TMP	a temp dir /tmp/zh-LAB.XXXXXX
#	BG	an array: append the PID of every background process started
# downs a leftover lab of that name, and traps EXIT to kill BG by PID, take
# the lab down and remove TMP.
lab_test_setup() {
	local c
	LAB=$1
	shift
	[ "$(id -u)" -eq 0 ] || skip_all "needs root"
	[ -x "$ZH" ] || skip_all "no $ZH (make first)"
	for c in python3 jq "$@"; do command -v "$c" >/dev/null || skip_all "no $c"; done
	PROBE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../bpf/lib" && pwd)/lbprobe.py
	TMP=$(mktemp -d "/tmp/zh-$LAB.XXXXXX")
	BG=()
	trap lab_test_cleanup EXIT
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
}

lab_test_cleanup() {
	local p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
	rm -rf "$TMP"
}
