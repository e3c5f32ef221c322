#!/usr/bin/env python3
"""A soak of `hyctl train` under faults, as an operator meets them.

A `hyctl train --nproc N` run (default 4) trains for --minutes while this
script injects, one after another:
  - kill -9 of a random worker every --kill-every seconds (~2 min),
  - one SIGSTOP of a worker (a hung process: the others' heartbeats see it),
  - one run-root write failure: the run root is a tmpfs in a user and mount
    namespace of its own, and a filler file takes its free space until a
    checkpoint fails for it (a real ENOSPC), then goes,
and ends it with SIGTERM. It then checks what an operator would:
  - every fault was survived: training (or, for the write failure, saving)
    went on, and how long that took;
  - no step was lost beyond the uncommitted tail: each restart resumed from
    a step no older than the newest one committed before the fault;
  - the SIGTERM ended the run with exit 0 and the iteration reached
    committed;
  - `hyctl verify` passes on the run root;
  - TensorBoard's own reader (EventAccumulator) sees one point per step
    1..N of ppo/reward_mean, restarts and redone steps included.

Prints a table, or with --json one JSON object. Exits 0 when every check
passes, 1 otherwise, 77 when no namespace / tmpfs can be made here.
Run with the repository's .venv (it has tensorboard):
  .venv/bin/python scripts/soak.py --hyctl build/bin/hyctl --minutes 20
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

NS_FLAG = "HY_SOAK_IN_NAMESPACE"


def enter_namespace(argv):
    """Re-executes this script under `unshare -rm` unless already there."""
    if os.environ.get(NS_FLAG) == "1":
        return
    if shutil.which("unshare") is None:
        print("SKIP: no unshare here", file=sys.stderr)
        sys.exit(77)
    env = dict(os.environ, **{NS_FLAG: "1"})
    r = subprocess.run(["unshare", "-rm", sys.executable] + argv, env=env)
    sys.exit(r.returncode)


class Run:
    """hyctl train in its own process group; its output read line by line,
    each line time-stamped."""

    def __init__(self, cmd, log_path):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lock = threading.Lock()
        self.iterations = []  # (t, json) of each iteration line.
        self.err = []  # (t, line).
        self.log = open(log_path, "w")
        self.threads = [
            threading.Thread(target=self._read, args=(self.proc.stdout, True)),
            threading.Thread(target=self._read, args=(self.proc.stderr, False)),
        ]
        for t in self.threads:
            t.daemon = True
            t.start()

    def now(self):
        return time.monotonic() - self.t0

    def _read(self, stream, is_out):
        for line in stream:
            t = self.now()
            with self.lock:
                self.log.write(f"{t:9.3f} {'out' if is_out else 'err'} {line}")
                if is_out:
                    try:
                        j = json.loads(line)
                    except ValueError:
                        continue
                    if "iteration" in j:
                        self.iterations.append((t, j))
                else:
                    self.err.append((t, line.rstrip("\n")))

    def snapshot(self):
        with self.lock:
            return list(self.iterations), list(self.err)

    def workers(self):
        """The pids of hyctl's worker children."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            if ppid == self.proc.pid and b"--worker" in cmd:
                out.append(int(pid))
        return sorted(out)

    def wait_for(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.proc.poll() is not None:
                return predicate()
            time.sleep(0.1)
        return False


def newest_committed(iterations, before):
    """The newest checkpoint_step the run reported before time `before`."""
    steps = [j.get("checkpoint_step", -1) for t, j in iterations if t <= before]
    return max(steps, default=-1)


def main():
    enter_namespace(sys.argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hyctl", required=True)
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--kill-every", type=float, default=120)
    ap.add_argument("--save-every", type=int, default=2)
    ap.add_argument("--disk-mb", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the run root and log in this folder")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)

    work = tempfile.mkdtemp(prefix="hy-soak-")
    disk = os.path.join(work, "disk")
    os.makedirs(disk)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={a.disk_mb}m",
                       "tmpfs", disk]).returncode != 0:
        print("SKIP: cannot mount a tmpfs here", file=sys.stderr)
        sys.exit(77)
    root = os.path.join(disk, "run")
    filler = os.path.join(disk, "filler")
    cmd = [a.hyctl, "train", "--nproc", str(a.nproc), "--iterations",
           "1000000", "--store", root, "-o", "json", "--max-restarts", "1000",
           "--set", f"checkpoint.save_every={a.save_every}"]
    run = Run(cmd, os.path.join(work, "soak.log"))
    faults = []
    checks = {}
    duration = a.minutes * 60

    def training_after(t, n=1):
        """Waits until n iterations are reported after time t; returns the
        time of the first, or None."""
        ok = run.wait_for(lambda: sum(1 for ti, _ in run.snapshot()[0]
                                      if ti > t) >= n, 600)
        if not ok:
            return None
        return min(ti for ti, _ in run.snapshot()[0] if ti > t)

    def restart_fault(kind, sig):
        pids = run.workers()
        if not pids:
            return
        victim = rng.choice(pids)
        t = run.now()
        its, _ = run.snapshot()
        before = newest_committed(its, t)
        os.kill(victim, sig)
        # Training again: the first iteration the restarted workers report.
        restarted = run.wait_for(lambda: any(
            ti > t and ", restart " in line and "starting" in line
            for ti, line in run.snapshot()[1]), 600)
        t_restart = min((ti for ti, line in run.snapshot()[1]
                         if ti > t and ", restart " in line
                         and "starting" in line), default=None)
        back = training_after(t_restart) if restarted else None
        _, err = run.snapshot()
        resumed = [int(m.group(1)) for ti, line in err if ti > t
                   for m in [re.search(r"recovered step (\d+)", line)] if m]
        f = {"kind": kind, "at_s": round(t, 1), "worker_pid": victim,
             "committed_before": before,
             "resumed_step": resumed[0] if resumed else None,
             "restarted_after_s": round(t_restart - t, 2) if restarted
             else None,
             "training_again_s": round(back - t, 2) if back else None}
        f["steps_lost"] = (max(0, before - f["resumed_step"])
                           if f["resumed_step"] is not None else None)
        f["survived"] = back is not None
        faults.append(f)

    def write_failure():
        t = run.now()
        # Fill the run root's disk; wait for a checkpoint to fail for it.
        with open(filler, "wb") as f:
            block = b"\0" * (1 << 20)
            try:
                while True:
                    f.write(block)
                    f.flush()
            except OSError:
                pass
        failed = run.wait_for(lambda: any(
            ti > t and "not saved: no space left on" in line
            for ti, line in run.snapshot()[1]), 300)
        os.remove(filler)
        t_free = run.now()
        ok = run.wait_for(lambda: any(
            ti > t_free and j.get("checkpoint_state", "").startswith(
                "committed") for ti, j in run.snapshot()[0]), 300)
        back = min((ti for ti, j in run.snapshot()[0] if ti > t_free and
                    j.get("checkpoint_state", "").startswith("committed")),
                   default=None)
        faults.append({"kind": "write_failure", "at_s": round(t, 1),
                       "checkpoint_failed": failed,
                       "saving_again_s": round(back - t_free, 2) if ok else None,
                       "steps_lost": 0, "survived": bool(failed and ok)})

    # The schedule: a first kill after a warm-up, then one fault every
    # kill_every seconds; the SIGSTOP and the write failure take the 2nd
    # and 3rd slots (or the first ones a short soak has).
    ok_start = training_after(0, n=3)
    if ok_start is None:
        run.proc.kill()
        print("the run never trained; see", os.path.join(work, "soak.log"))
        sys.exit(1)
    slot = 0
    next_at = run.now() + min(a.kill_every, 20)
    while run.now() + 10 < duration:
        if run.proc.poll() is not None:
            break
        if run.now() < next_at:
            time.sleep(0.2)
            continue
        if slot == 1:
            restart_fault("sigstop", signal.SIGSTOP)
        elif slot == 2:
            write_failure()
        else:
            restart_fault("kill9", signal.SIGKILL)
        slot += 1
        next_at = max(next_at + a.kill_every, run.now() + 15)

    # The end: SIGTERM to hyctl, as a scheduler does.
    t_stop = run.now()
    alive = run.proc.poll() is None
    if alive:
        run.proc.send_signal(signal.SIGTERM)
    try:
        rc = run.proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        rc = run.proc.wait()
    for t in run.threads:
        t.join(timeout=10)
    its, err = run.snapshot()
    final = max((j["iteration"] for _, j in its), default=0)
    said = [line for _, line in err if "stopped by Terminated after" in line]
    m = re.search(r"committed step (\d+)", said[-1]) if said else None
    checks["sigterm_exit_0"] = alive and rc == 0
    checks["sigterm_committed_reached"] = bool(m) and int(m.group(1)) == final
    checks["no_abort_or_crash"] = not any(
        "Assertion" in line or "Segmentation" in line for _, line in err)
    v = subprocess.run([a.hyctl, "verify", root], capture_output=True,
                       text=True)
    checks["verify"] = v.returncode == 0
    # TensorBoard's own reader: one point per step, 1..final.
    try:
        from tensorboard.backend.event_processing import event_accumulator
        acc = event_accumulator.EventAccumulator(
            os.path.join(root, "tensorboard"), size_guidance={"scalars": 0})
        acc.Reload()
        steps = [e.step for e in acc.Scalars("ppo/reward_mean")]
        checks["tensorboard_one_point_per_step"] = steps == list(
            range(1, final + 1))
        tb_note = f"{len(steps)} points, steps {steps[:1]}..{steps[-1:]}"
    except ImportError:
        checks["tensorboard_one_point_per_step"] = None
        tb_note = "tensorboard not installed: not checked"
    restarts = sum(1 for _, line in err if "restarting on" in line)
    survived = sum(1 for f in faults if f["survived"])
    lost = sum(f["steps_lost"] or 0 for f in faults)
    checks["every_fault_survived"] = survived == len(faults)
    checks["no_step_lost"] = lost == 0 and all(
        f["steps_lost"] is not None for f in faults)
    report = {
        "minutes": round(t_stop / 60, 2), "nproc": a.nproc,
        "iterations": final, "exit_code": rc, "restarts": restarts,
        "faults_injected": len(faults), "faults_survived": survived,
        "steps_lost": lost, "faults": faults, "checks": checks,
        "tensorboard": tb_note, "verify": v.stdout.strip().splitlines()[-1:],
    }
    passed = all(c is not False for c in checks.values())
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        shutil.copy(os.path.join(work, "soak.log"), a.keep)
        shutil.copytree(root, os.path.join(a.keep, "run"), dirs_exist_ok=True)
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"soak: {report['minutes']} min, {a.nproc} ranks, {final} "
              f"iterations, {restarts} restarts, exit {rc}")
        print(f"{'fault':<14}{'at s':>8}{'committed':>11}{'resumed':>9}"
              f"{'lost':>6}{'restart s':>11}{'training s':>12}")
        for f in faults:
            back = f.get("training_again_s", f.get("saving_again_s"))
            print(f"{f['kind']:<14}{f['at_s']:>8}"
                  f"{str(f.get('committed_before', '-')):>11}"
                  f"{str(f.get('resumed_step', '-')):>9}"
                  f"{str(f['steps_lost']):>6}"
                  f"{str(f.get('restarted_after_s', '-')):>11}"
                  f"{str(back):>12}")
        print("  (restart s: fault to the workers' restart; training s: "
              "fault to the first iteration after it, or for the write "
              "failure, room made to the next commit)")
        for k, c in checks.items():
            print(f"  {'ok  ' if c else ('--  ' if c is None else 'FAIL')} {k}")
        print(f"  tensorboard: {tb_note}")
    subprocess.run(["umount", "-l", disk])
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
