# stats.sh — the small statistics every benchmark script reports with, so a
# median means the same thing in each of them.
#	median		stdin: one number per line -> the median
#	spread		stdin: one number per line -> "MIN..MAX"
#	ratio A B	A / B to 3 decimals (0 when B is 0)
#	proc_ticks PID	user + system CPU ticks of a process so far (/proc)
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s..%s", lo, hi}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f\n", (b > 0 ? a / b : 0)}'; }
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
