#!/usr/bin/env python3
"""scripts/render-dashboard.py on a short real run with a recovery: `hyctl
train --metrics-port 0` (configs/demo.yaml, 2 ranks, 80 iterations: the restarted workers must train long enough to be scraped) with
its last worker killed (kill -9) 12 s in, or once a checkpoint is
committed (--kill-worker-at), so that hyctl train restarts the workers and
they recover the last committed step; scraped by a real Prometheus started
with metrics/prometheus.yml; every panel of metrics/grafana/hy-overview.json
is evaluated with its own queries and drawn.

Checks: exit 0; both ranks scraped; no query fails; every panel has data
except "Weight sync p50 / p99" (no vLLM engine, so no weight sync: the
quantiles of an empty histogram are NaN), which still returns series (NaN),
so its queries are right; the Recovery row shows the recovery: restarts and
recoveries with cause process_exit read 1 (one restart of the run, though
both ranks count it), node_lost 0, and the recovery phases have values
(detect > 0). A restarted worker counts its restart and observes its
recovery as it starts, on a new series (new port): a dashboard that reads
them with increase() shows 0 and NaN here. The PNG is 1600 pixels wide.
Errors: a run root without prometheus-targets.json and a missing prometheus
binary exit 2 with a message naming the fix.

Needs Debian's prometheus, matplotlib and a built hyctl (HYCTL, default
build/bin/hyctl). About 35 to 60 s on 2 cores.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("HY_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SOURCE, "scripts", "render-dashboard.py")
EMPTY_ON_THIS_RUN = {"Weight sync p50 / p99"}
RECOVERY_COUNTS = "Recoveries and restarts by cause"
RECOVERY_PHASES = "Recovery time by phase (mean over range)"

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(args, timeout=240):
    return subprocess.run([sys.executable, SCRIPT] + args,
                          capture_output=True, text=True, timeout=timeout)


with tempfile.TemporaryDirectory(prefix="render-dashboard-test-") as tmp:
    # Clear errors first (fast).
    r = run(["--run-root", tmp, "--out", os.path.join(tmp, "x.png")])
    check(r.returncode == 2 and "prometheus-targets.json does not exist"
          in r.stderr and "--metrics-port" in r.stderr,
          "a run root without targets: exit 2, says how to make them (%d: %s)"
          % (r.returncode, r.stderr.strip()))
    r = run(["--prometheus-bin", "hy-no-such-prometheus",
             "--out", os.path.join(tmp, "x.png")])
    check(r.returncode == 2 and "apt-get install prometheus" in r.stderr,
          "no prometheus: exit 2, names the package (%d: %s)"
          % (r.returncode, r.stderr.strip()))

    out = os.path.join(tmp, "dashboard.png")
    r = run(["--iterations", "80", "--kill-worker-at", "12", "--minutes",
             "2", "--out", out, "--json"])
    check(r.returncode == 0, "rendered a real run (exit %d)\n%s"
          % (r.returncode, r.stderr[-3000:]))
    if r.returncode == 0:
        s = json.loads(r.stdout)
        print("took %s s in all, %s s to query and draw"
              % (s["seconds"]["total"], s["seconds"]["query_and_render"]))
        check(s["targets_up"] == 2, "both ranks scraped (%d)"
              % s["targets_up"])
        check(len(s["panels"]) >= 30, "%d panels" % len(s["panels"]))
        for p in s["panels"]:
            for t in p["targets"]:
                check(t["error"] is None, "query runs: %s (%s)"
                      % (t["expr"], t["error"]))
            if p["title"] in EMPTY_ON_THIS_RUN:
                check(p["series"] > 0, "%r returns series (NaN here)"
                      % p["title"])
            else:
                check(p["finite_points"] > 0, "%r has data (%d series, "
                      "%d points)" % (p["title"], p["series"],
                                      p["finite_points"]))
        # The Recovery row: {legend: last value} of each panel.
        shown = {p["title"]: {v["legend"]: v["value"] for t in p["targets"]
                              for v in t["last"]} for p in s["panels"]}
        counts = shown.get(RECOVERY_COUNTS, {})
        for what in ("restarts", "recoveries"):
            check(counts.get(what + " process_exit") == 1,
                  "%s process_exit reads 1 (one kill): %s"
                  % (what, counts))
            check(counts.get(what + " node_lost") == 0,
                  "%s node_lost reads 0" % what)
        phases = shown.get(RECOVERY_PHASES, {})
        check((phases.get("detect") or 0) > 0 and all(
            phases.get(ph) is not None
            for ph in ("detect", "plan", "read", "reshard", "resume")),
              "recovery time by phase has values: %s" % phases)
        empty = {e["title"] for e in s["empty_panels"]}
        check(empty <= EMPTY_ON_THIS_RUN, "empty panels: %s" % sorted(empty))
        with open(out, "rb") as f:
            head = f.read(24)
        check(head[:8] == b"\x89PNG\r\n\x1a\n"
              and struct.unpack(">I", head[16:20])[0] == 1600,
              "the output is a 1600 px wide PNG")

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("all checks passed")
