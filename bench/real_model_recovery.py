"""The real-model job through a worker killed with SIGKILL.

    python bench/real_model_recovery.py [--kill-at N] [--dir DIR] [--json] [-- hyctl train args]

Runs scripts/demo-real.sh (SmolLM2-135M-Instruct, configs/real-smollm2.yaml)
with -o json and, when iteration N (default 12) is reported, kills rank
1's worker process (node-1/worker.pid) with SIGKILL. hyctl train's
supervisor sees it, stops the other worker, and restarts both from the
last committed step; the script waits for the run to finish and reports:

- the step the restart resumed from and the iterations done again;
- seconds from the kill to the supervisor's restart line, and to training
  again (the restarted run's first iteration began: its report's arrival
  less its iteration_ms);
- the held-out strict exact match: hy's validation before and after, and
  transformers' on the export (scripts/lib/score_hf.py, what demo-real.sh
  prints last);
- the whole script's wall time.

A table, or one JSON object with --json. Needs the build (HYCTL) and the
model (scripts/fetch-model.sh); HY_DEMO_DIR is set to --dir.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kill-at", type=int, default=12)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("train_args", nargs="*")
    a = ap.parse_args()
    run = Path(a.dir or SRC / "runs" / f"real-recovery-{int(time.time())}")
    env = dict(os.environ, HY_DEMO_DIR=str(run))
    t_start = time.time()
    proc = subprocess.Popen(
        ["bash", str(SRC / "scripts" / "demo-real.sh"), "-o", "json",
         *a.train_args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=SRC, env=env)
    err_lines = []

    def read_err():
        for line in proc.stderr:
            err_lines.append((time.time(), line))
            sys.stderr.write(line)
    t = threading.Thread(target=read_err, daemon=True)
    t.start()

    its, vals, score, killed = [], [], None, None
    for line in proc.stdout:
        now = time.time()
        if not a.json:
            sys.stdout.write(line)
        if line.startswith('{"iteration"'):
            j = json.loads(line)
            its.append((now, j))
            if j["iteration"] == a.kill_at and killed is None:
                pid = int((run / "store" / "node-1" / "worker.pid")
                          .read_text())
                os.kill(pid, signal.SIGKILL)
                killed = time.time()
        elif line.startswith('{"validation"') or '"validation"' in line[:40]:
            vals.append(json.loads(line)["validation"])
        m = re.match(r"held-out strict exact match ([0-9.]+)", line)
        if m:
            score = float(m.group(1))
    proc.wait()
    t.join()
    wall = time.time() - t_start
    if proc.returncode != 0 or killed is None:
        sys.exit(f"demo-real.sh exited {proc.returncode}; killed: "
                 f"{killed is not None}")
    restart = next((ts for ts, l in err_lines
                    if ts > killed and ", restart 1" in l), None)
    after = [(ts, j) for ts, j in its if ts > killed]
    first_ts, first = after[0]
    resumed_from = first["iteration"] - 1
    result = {
        "kill_at_iteration": a.kill_at,
        "resumed_from_step": resumed_from,
        "iterations_redone": a.kill_at - resumed_from,
        "kill_to_restart_s": round(restart - killed, 1) if restart else None,
        "kill_to_training_s": round(
            first_ts - first["iteration_ms"] / 1000 - killed, 1),
        "kill_to_next_report_s": round(first_ts - killed, 1),
        "iterations": its[-1][1]["iteration"],
        "validation_strict": [[v["iteration"], v["exact_match"]] for v in vals],
        "transformers_strict_on_export": score,
        "peak_rss_mb_max": max(max(j["peak_rss_mb"]) for _, j in its),
        "iteration_s_median": sorted(j["iteration_ms"] for _, j in its)[
            len(its) // 2] / 1000,
        "wall_s": round(wall, 1),
        "dir": str(run),
    }
    if a.json:
        print(json.dumps(result))
    else:
        print("\n| figure | value |\n|---|---|")
        for k, v in result.items():
            print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
