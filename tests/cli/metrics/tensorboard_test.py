"""hyctl train's TensorBoard events against TensorBoard's own reader, and
hyctl plot's PNG against a PNG decoder.

1. A short 2-rank run of the README demo's config (shortened, with held-out
   prompts) with -o json: TensorBoard's EventAccumulator (PyPI tensorboard)
   reads <store>/tensorboard back, and every scalar equals, per step, the
   JSON line's value rounded to float32 (TensorBoard stores float32); the
   held-out validations sit at their iterations; the tag set is exactly
   the documented one; the effective config is a text-plugin string.
2. A run that loses a worker (SIGKILL: hyctl's launcher restarts it from
   the last commit), then is killed whole (SIGKILL to every process) and
   resumed with --resume: EventAccumulator shows exactly one point per
   step for every tag, no step missing, each equal to the last JSON line
   printed for that step (the process that redid it).
3. hyctl plot writes a PNG of the requested size that Pillow decodes;
   the default is 1600x1000.

Run by CTest (cli.tensorboard) with the build's Python; HYCTL and
HY_SOURCE_DIR come from the environment. Needs tensorboard and Pillow
(scripts/install-deps.sh): a missing package fails, it does not skip.
"""

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
from PIL import Image
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator)
from tensorboard.util import tensor_util

HYCTL = os.environ["HYCTL"]
SRC = Path(os.environ["HY_SOURCE_DIR"])

# JSON key of an iteration line -> TensorBoard tag (cli/train/train_events.h).
ITERATION_TAGS = {
    "reward_mean": "ppo/reward_mean",
    "exact_match": "ppo/exact_match",
    "kl": "ppo/kl",
    "kl_coef": "ppo/kl_coef",
    "policy_loss": "ppo/policy_loss",
    "value_loss": "ppo/value_loss",
    "entropy": "ppo/entropy",
    "clip_frac": "ppo/clip_frac",
    "grad_norm": "ppo/grad_norm",
    "response_length": "ppo/response_length",
    "tokens_per_second": "throughput/tokens_per_second",
    "rollout_ms": "time/rollout_ms",
    "reward_ms": "time/reward_ms",
    "train_ms": "time/train_ms",
    "iteration_ms": "time/iteration_ms",
    "reshard_ms": "time/reshard_ms",
    "reshard_bytes": "reshard/bytes",
    "reshard_logical_bytes": "reshard/logical_bytes",
    "world_size": "run/world_size",
    "checkpoint_step": "checkpoint/step",
    "checkpoint_ms": "checkpoint/blocking_ms",
    "checkpoint_durable_ms": "checkpoint/durable_ms",
    "checkpoint_failures": "checkpoint/failures",
}
VALIDATION_TAGS = {
    "exact_match": "val/exact_match",
    "reward_mean": "val/reward_mean",
    "prompts": "val/prompts",
}


def env():
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
              "MASTER_PORT", "HY_TRAIN_CONFIG_YAML"):
        e.pop(k, None)
    return e


def hyctl(*args):
    p = subprocess.run([HYCTL, *map(str, args)], capture_output=True,
                       text=True, cwd=SRC, env=env())
    assert p.returncode == 0, (f"hyctl {' '.join(map(str, args))} exited "
                               f"{p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def data(tmp):
    hyctl("data", "gen-arith", tmp / "train.jsonl", "--count", 2000,
          "--seed", 1, "--ops", "+", "--max-digits", 1)
    hyctl("data", "gen-arith", tmp / "val.jsonl", "--count", 40, "--seed",
          2, "--ops", "+", "--max-digits", 1)


def train_args(tmp, store, iterations, test_freq=0):
    return ["train", "--config", SRC / "configs" / "demo.yaml", "--data",
            tmp / "train.jsonl", "--val-data", tmp / "val.jsonl", "--store",
            store, "--iterations", iterations, "-o", "json",
            "--set", "trainer.sft_steps=5", "--set", "rollout.batch_size=32",
            "--set", "actor.ppo_mini_batch_size=16",
            "--set", "checkpoint.save_every=2",
            "--set", "checkpoint.heartbeat_timeout_ms=3000",
            "--set", f"trainer.test_freq={test_freq}"]


def json_lines(text):
    """The JSON objects of the whole lines of `text` (a line still being
    written, without its newline, is left out)."""
    return [json.loads(line) for line in text.splitlines(keepends=True)
            if line.startswith("{") and line.endswith("\n")]


def accumulator(store):
    acc = EventAccumulator(str(store / "tensorboard"),
                           size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def f32(x):
    return math.nan if x is None else float(np.float32(x))


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def expected_points(lines):
    """tag -> {step: float32 value}, the last line printed for each step."""
    want = {}
    for j in lines:
        if "validation" in j:
            v = j["validation"]
            for key, tag in VALIDATION_TAGS.items():
                want.setdefault(tag, {})[v["iteration"]] = f32(v[key])
            continue
        step = j["iteration"]
        for key, tag in ITERATION_TAGS.items():
            want.setdefault(tag, {})[step] = f32(j[key])
        for key in ("correct_rate", "format_rate"):  # Where the reward
            if j[key] is not None:                   # has that part.
                want.setdefault(f"ppo/{key}", {})[step] = f32(j[key])
        rss = j["peak_rss_mb"]
        want.setdefault("memory/peak_rss_mb", {})[step] = f32(max(rss))
        for k, mb in enumerate(rss):
            want.setdefault(f"memory/peak_rss_mb/rank_{k}", {})[step] = f32(mb)
        for phase, mb in j["phase_peak_rss_mb"].items():
            want.setdefault(f"memory/phase_peak_rss_mb/{phase}",
                            {})[step] = f32(mb)
    return want


def check_scalars(acc, want):
    assert sorted(acc.Tags()["scalars"]) == sorted(want)
    for tag, points in want.items():
        got = acc.Scalars(tag)
        steps = [e.step for e in got]
        assert steps == sorted(points), (tag, steps)  # One per step.
        for e in got:
            assert same(e.value, points[e.step]), (tag, e.step, e.value,
                                                    points[e.step])


def test_events_match_json(tmp_path):
    data(tmp_path)
    store = tmp_path / "store"
    p = hyctl(*train_args(tmp_path, store, 6, test_freq=3))
    lines = json_lines(p.stdout)
    iterations = [j for j in lines if "validation" not in j]
    validations = [j["validation"] for j in lines if "validation" in j]
    assert [j["iteration"] for j in iterations] == [1, 2, 3, 4, 5, 6]
    assert [v["iteration"] for v in validations] == [0, 3, 6]

    acc = accumulator(store)
    want = expected_points(lines)
    check_scalars(acc, want)
    assert sorted(acc.Scalars("val/exact_match")[i].step
                  for i in range(3)) == [0, 3, 6]

    # The effective config, once, as TensorBoard's text plugin reads it.
    assert "config" in acc.Tags()["tensors"]
    meta = acc.SummaryMetadata("config")
    assert meta.plugin_data.plugin_name == "text"
    [config] = acc.Tensors("config")
    assert config.step == 1
    text = config.tensor_proto.string_val[0].decode()
    assert "total_iterations: 6" in text and "test_freq: 3" in text
    # The checkpoint states, as text where there is one.
    states = {e.step: e.tensor_proto.string_val[0].decode()
              for e in acc.Tensors("checkpoint/state")}
    printed = {j["iteration"]: j["checkpoint_state"] for j in iterations
               if j["checkpoint_state"]}
    assert states == printed


def wait_for(predicate, what, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_killed_and_resumed_run_has_one_point_per_step(tmp_path):
    data(tmp_path)
    store = tmp_path / "store"
    out = tmp_path / "first.out"
    total = 10
    with open(out, "w") as f, open(tmp_path / "first.err", "w") as err:
        job = subprocess.Popen([HYCTL, *map(str, train_args(
            tmp_path, store, total))], stdout=f, stderr=err, cwd=SRC,
            env=env(), start_new_session=True)
    try:
        def printed():
            return [j["iteration"] for j in json_lines(out.read_text())
                    if "validation" not in j]

        # A worker lost after iteration 3: the launcher restarts the job
        # from the last commit (step 2, or 4 if it landed meanwhile), which
        # redoes the steps after it.
        wait_for(lambda: len(printed()) >= 3, "iteration 3")
        pid = int((store / "node-1" / "worker.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        before = len(printed())
        tb_dir = store / "tensorboard"
        wait_for(lambda: len(list(tb_dir.iterdir())) == 2 and
                 len(printed()) > before + 1, "the restarted job's iterations")
        # Then the whole job killed after iteration 7, between commits.
        wait_for(lambda: printed()[-1] >= 7, "iteration 7")
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    first = json_lines(out.read_text())
    assert max(printed()) < total, "the run ended before it was killed"

    p = hyctl("train", "--resume", store, "-o", "json")
    resumed = json_lines(p.stdout)
    redone = [j["iteration"] for j in resumed if "validation" not in j]
    assert redone[0] <= printed()[-1] and redone[-1] == total, redone
    everything = printed() + redone
    assert len(everything) > len(set(everything)), "no step was redone"

    # Three processes wrote (the first, its restart, the resume), each its
    # own file and its own START; the config once per process.
    assert len(list((store / "tensorboard").iterdir())) == 3
    acc = accumulator(store)
    starts = sorted(e.step for e in acc.Tensors("config"))
    assert len(starts) == 3 and starts[0] == 1 and starts[-1] == redone[0]
    want = expected_points(first + resumed)
    for tag in acc.Tags()["scalars"]:
        steps = [e.step for e in acc.Scalars(tag)]
        if tag.startswith("val/"):
            assert len(steps) == len(set(steps)), (tag, steps)
        else:
            assert steps == list(range(1, total + 1)), (tag, steps)
    check_scalars(acc, want)
    # The loader behind TensorBoard's web UI (scalars and text as tensors,
    # purged alike): the same points, and each checkpoint state once.
    web = plugin_event_accumulator.EventAccumulator(
        str(store / "tensorboard"), size_guidance={"tensors": 0})
    web.Reload()
    for tag, points in want.items():
        got = {e.step: float(tensor_util.make_ndarray(e.tensor_proto))
               for e in web.Tensors(tag)}
        assert len(got) == len(web.Tensors(tag)), tag
        assert sorted(got) == sorted(points), (tag, sorted(got))
        for step, value in got.items():
            assert same(value, points[step]), (tag, step, value)
    states = [e.step for e in web.Tensors("checkpoint/state")]
    assert len(states) == len(set(states)), states
    # The plot reads the same records the same way.
    png = tmp_path / "run.png"
    hyctl("plot", store, "--png", png)
    with Image.open(png) as im:
        assert im.size == (1600, 1000)


def test_plot_writes_a_png_of_the_requested_size(tmp_path):
    data(tmp_path)
    store = tmp_path / "store"
    hyctl(*train_args(tmp_path, store, 3))
    png = tmp_path / "small.png"
    p = hyctl("plot", store, "--png", png, "--width", 800, "--height", 500)
    assert str(png) in p.stdout
    assert "old spelling" not in p.stderr
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (800, 500)
        im.load()  # Decodes every row (zlib, CRCs).
        colors = im.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colors is None or len(colors) > 8  # Not a blank page.
    # The default: RUN_ROOT/run.png, 1600x1000.
    hyctl("plot", store)
    with Image.open(store / "run.png") as im:
        assert im.size == (1600, 1000)
    # A record cut short at the end (a writer killed mid-write): skipped,
    # said on stderr; a damaged one: exit 3 naming the file.
    [events] = list((store / "tensorboard").iterdir())
    whole = events.read_bytes()
    events.write_bytes(whole[:-7])
    # (-o, the old spelling of --png, still works and says so.)
    p = hyctl("plot", store, "-o", png)
    assert "cut short" in p.stderr, p.stderr
    assert "hyctl plot: -o is the old spelling of --png" in p.stderr
    damaged = bytearray(whole)
    damaged[len(whole) // 2] ^= 0x10
    events.write_bytes(bytes(damaged))
    p = subprocess.run([HYCTL, "plot", str(store), "--png", str(png)],
                       capture_output=True, text=True, env=env())
    assert p.returncode == 3 and "CRC" in p.stderr, p
    assert events.name in p.stderr, p.stderr
    # No events: a clear error, not a picture.
    empty = tmp_path / "empty"
    empty.mkdir()
    p = subprocess.run([HYCTL, "plot", str(empty)], capture_output=True,
                       text=True, env=env())
    assert p.returncode == 2 and "no TensorBoard events" in p.stderr, p
