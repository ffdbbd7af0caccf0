#!/usr/bin/python3
"""kinvolk.py — helpers of scripts/bench-kinvolk.sh (the Kinvolk method).

  kinvolk.py usage LAB KIND      CPU seconds and memory of LAB's mesh processes
      KIND sidecar: every HAProxy in the lab's pod cgroups (the sidecars);
      KIND zerohop: the node agents and node L7 proxies (system/agent-*,
      system/proxy-*); KIND none: nothing. Prints one JSON object:
      {"cpu_s": user+system seconds of the live processes and their reaped
       children, "pss_kib": summed PSS (shared pages split, so a master and
       its forked worker are not counted twice), "rss_hwm_kib": summed
       peak RSS (VmHWM), "procs": N, "pods": pods with a sidecar (sidecar)}
  kinvolk.py summarize DIR REF   DIR/runs.jsonl -> DIR/kinvolk.json and the
      table per rate on stdout (median over repetitions of each figure).
  kinvolk.py line DIR CONTENDER  that contender's summary in one line.
"""
import json
import os
import statistics
import sys

TCK = os.sysconf("SC_CLK_TCK")


def cgroot():
    with open("/proc/mounts") as f:
        for line in f:
            p = line.split()
            if p[2] == "cgroup2":
                return p[1]
    return "/run/zerohop/cgroup2"


def pids(cg):
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def proc_usage(pid):
    """(cpu seconds incl. reaped children, pss KiB, VmHWM KiB, comm) or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        comm = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        cpu = sum(int(x) for x in f[11:15]) / TCK  # utime stime cutime cstime
        pss = hwm = 0
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        return cpu, pss, hwm, comm
    except (OSError, ValueError):
        return None


def usage(lab, kind):
    root = os.path.join(cgroot(), "zerohop-" + lab)
    out = {"cpu_s": 0.0, "pss_kib": 0, "rss_hwm_kib": 0, "procs": 0, "pods": 0}
    groups = []
    if kind == "sidecar":
        for node in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            nd = os.path.join(root, node)
            if node == "system" or not os.path.isdir(nd):
                continue
            for pod in sorted(os.listdir(nd)):
                if os.path.isdir(os.path.join(nd, pod)):
                    groups.append((os.path.join(nd, pod), "haproxy"))
    elif kind == "zerohop":
        sd = os.path.join(root, "system")
        for g in sorted(os.listdir(sd)) if os.path.isdir(sd) else []:
            if g.startswith("agent-") or g.startswith("proxy-"):
                groups.append((os.path.join(sd, g), None))
    for cg, want in groups:
        found = False
        for pid in pids(cg):
            u = proc_usage(pid)
            if not u or (want and u[3] != want):
                continue
            found = True
            out["cpu_s"] += u[0]
            out["pss_kib"] += u[1]
            out["rss_hwm_kib"] += u[2]
            out["procs"] += 1
        out["pods"] += found and kind == "sidecar"
    print(json.dumps(out))


PCTS = ["50", "75", "90", "99", "99.9", "99.99"]


def pct_ms(run, p):
    for e in run["bench"]["DurationHistogram"]["Percentiles"]:
        if ("%g" % e["Percentile"]) == p:
            return e["Value"] * 1000
    return None


def summarize(d, ref):
    runs = [json.loads(x) for x in open(os.path.join(d, "runs.jsonl")) if x.strip()]
    rates = sorted({r["rate_pct"] for r in runs})
    order = []
    for r in runs:
        if r["contender"] not in order:
            order.append(r["contender"])
    summary = []
    for rate in rates:
        rr = [r for r in runs if r["rate_pct"] == rate]
        qps = rr[0]["qps"]
        print(f"\n== {rate} % of the reference maximum ({ref}): {qps} req/s, "
              f"{len([r for r in rr if r['contender'] == order[0]])} repetitions, "
              "median of each figure (ms, coordinated-omission corrected) ==")
        hdr = "%-14s" % "contender" + "".join("%11s" % ("p" + p) for p in PCTS) + \
            "%11s %9s %7s %9s %8s %s" % ("max", "req/s", "errors", "cpu_s/1k", "KiB/pod", "runs")
        print(hdr)
        for c in order:
            cr = [r for r in rr if r["contender"] == c]
            if not cr:
                continue
            ok = [r for r in cr if not r["rejected"]]
            use = ok or cr
            row = {"contender": c, "rate_pct": rate, "qps": qps, "runs": len(cr),
                   "rejected": len(cr) - len(ok)}
            for p in PCTS:
                row["p" + p] = statistics.median(pct_ms(r, p) for r in use)
            row["max"] = statistics.median(r["bench"]["DurationHistogram"]["Max"] * 1000
                                           for r in use)
            row["actual_qps"] = statistics.median(r["bench"]["ActualQPS"] for r in use)
            row["errors"] = sum(sum(r["bench"]["Errors"].values()) for r in cr)
            row["cpu_s_per_1k"] = statistics.median(r["cpu_s_per_1k"] for r in use)
            row["mem_kib_per_pod"] = max(r["mem_kib_per_pod"] for r in use)
            # The run whose p99 is the median: its histogram goes in the HTML.
            s = sorted(use, key=lambda r: pct_ms(r, "99"))
            row["median_run"] = s[len(s) // 2]["json"]
            summary.append(row)
            print("%-14s" % c + "".join("%11.3f" % row["p" + p] for p in PCTS) +
                  "%11.3f %9.0f %7d %9.4f %8.0f %d%s" % (
                      row["max"], row["actual_qps"], row["errors"], row["cpu_s_per_1k"],
                      row["mem_kib_per_pod"], len(cr),
                      " (%d rejected)" % row["rejected"] if row["rejected"] else ""))
        base = next((s for s in summary if s["rate_pct"] == rate and s["contender"] == order[0]),
                    None)
        if base:
            # Paired within each repetition (the contenders of one
            # repetition ran back to back), then the median over the
            # repetitions: docs/BENCHMARKS.md "median of pairs".
            def added(c, rep, p):
                a = [r for r in rr if r["contender"] == c and r["rep"] == rep]
                b = [r for r in rr if r["contender"] == order[0] and r["rep"] == rep]
                return pct_ms(a[0], p) - pct_ms(b[0], p) if a and b else None

            reps = sorted({r["rep"] for r in rr})
            print("latency added over %s (ms; median over repetitions of the paired "
                  "differences, min..max)%s:" % (order[0], "; ratio to sidecar likewise"
                                                 if "sidecar" in order else ""))
            for s in summary:
                if s["rate_pct"] != rate or s is base:
                    continue
                c = s["contender"]
                line = "  %-14s" % c
                for p in ("50", "99"):
                    v = [x for x in (added(c, rep, p) for rep in reps) if x is not None]
                    s["added_p" + p] = statistics.median(v)
                    line += "  p%s %+.3f (%+.3f..%+.3f)" % (p, s["added_p" + p], min(v), max(v))
                    sc = [(added(c, rep, p), added("sidecar", rep, p)) for rep in reps]
                    sc = [x / y for x, y in sc if x is not None and y]
                    if "sidecar" in order and c != "sidecar" and sc:
                        s["ratio_to_sidecar_p" + p] = statistics.median(sc)
                        line += " = %.2fx" % s["ratio_to_sidecar_p" + p]
                print(line)
    with open(os.path.join(d, "kinvolk.json"), "w") as f:
        json.dump({"reference": ref, "summary": summary, "runs": [
            {k: v for k, v in r.items() if k != "bench"} for r in runs]}, f, indent=1)


def line(d, contender):
    """One contender of DIR/kinvolk.json in a line (zerohop demo)."""
    with open(os.path.join(d, "kinvolk.json")) as f:
        for r in json.load(f)["summary"]:
            if r["contender"] == contender:
                print("p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  mesh CPU %.4f s/1k req  "
                      "%.0f KiB/pod%s" % (r["p50"], r["p99"], r["p99.9"], r["max"],
                                          r["cpu_s_per_1k"], r["mem_kib_per_pod"],
                                          "  (REJECTED: errors or rate not held)"
                                          if r["rejected"] else ""))
                return
    sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "usage":
        usage(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "summarize":
        summarize(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "line":
        line(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
