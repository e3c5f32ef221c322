"""Weight sync into a vLLM engine: hy against verl's colocated way, an
engine restart and a memcpy, side by side in one run.

Model: the Qwen2-0.5B shape of configs/scale-qwen2-0.5b.yaml (494M
parameters, tied, bf16 in the engine; --model demo: the README demo's),
random weights, 2 trainer ranks, one engine (tensor parallel 1), median of
--reps. Each row is the time from "the optimizer step is done" to "the
engine serves the new weights", and the peak resident memory above what
each side held before:

  hy        bench/vllm_sync_bench.cc: 2 rank processes write their FSDP
            pieces into the shared weight file, the engine (vllm serve with
            hy_vllm, as hyctl train starts it) loads it through the weight
            transfer API and layerwise reload.
  verl      verl's colocated hybrid engine re-created on the CPU (not verl's code): vLLM in the trainer's
            rank-0 process (VLLM_ENABLE_V1_MULTIPROCESSING=0); each
            parameter all-gathered from the 2 ranks (FSDP2's dim-0 shards,
            torch.distributed over Gloo), cast to bf16 and streamed through
            collective_rpc into the worker's reload_weights(weights_iterator).
  restart   the model exported as an HF directory (safetensors) and a fresh
            engine started on it, up to /health.
  hy c10d   the same with rank 1 as if on another host: it sends its
            pieces to rank 0 over c10d (Gloo, loopback), rank 0 unpacks
            them into the file (what ranks on other hosts than the
            engine's do); then again after 1%, 5% and 50% of the values
            changed (--changed) with rank 1 sending a delta
            (rollout.vllm.delta auto, learning the link; --delta on
            always looks for changes). scripts/bench-vllm-link.sh runs
            these across network namespaces over links tc shapes.
  memcpy    one memcpy of the engine's bytes (the limit).
  python    hystate.vllm.EngineSync from one process with a plain state
            dict (bench/py_vllm_sync.py, the build's interpreter): a full
            push against a delta push after three kinds of change (1% of
            the values of every tensor; of every tensor but the
            embedding; of the last 4 layers only). On one host a delta
            saves the engine's reload of the layers nothing changed in.
            Then from 2 ranks holding DTensor halves
            (bench/py_vllm_sync_ranks.py), rank 1 on this host and on
            another (namespaces: it sends what changed over c10d), after
            1%, 5% and 50% of every tensor's values changed; and after
            real AdamW steps (one process, float32 master weights, a
            language-model loss, lr 1e-6 and 1e-5: --train-lr), the
            fraction of the engine's bf16 values each step changed and
            what a rank on another host would send for them.

Also the README demo's iteration time on vLLM against hy's own rollout
(--demo-iterations; 0 skips it).

Run with vLLM's interpreter after the build:
  .venv-vllm/bin/python3 bench/vllm_sync_bench.py [--json] [--reps 3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SRC / "python"))
from hy_vllm import serve  # noqa: E402
HYCTL = Path(os.environ.get("HYCTL", SRC / "build" / "bin" / "hyctl"))
SYNC_BIN = Path(os.environ.get("HY_BENCH_VLLM_SYNC",
                               SRC / "build" / "bin" / "hy_bench_vllm_sync"))

SHAPES = {
    "0.5b": dict(hidden_size=896, intermediate_size=4864,
                 num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936,
                 tokenizer=SRC / "tests/data/tokenizers/qwen3"),
    "demo": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2,
                 vocab_size=272, tokenizer=SRC / "configs/demo-tokenizer"),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def rss_kb(pid, field):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def group_pids(pgid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getpgid(int(d)) == pgid:
                    out.append(int(d))
            except OSError:
                pass
    return out


def reset_peak(pid):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def model_dir(root, shape):
    from transformers import Qwen2Config
    s = dict(SHAPES[shape])
    tok = s.pop("tokenizer")
    d = root / f"model-{shape}"
    d.mkdir(parents=True, exist_ok=True)
    Qwen2Config(**s, head_dim=64 if shape == "0.5b" else 32,
                architectures=["Qwen2ForCausalLM"],
                tie_word_embeddings=True, max_position_embeddings=512,
                torch_dtype="bfloat16").save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (tok / f).exists():
            shutil.copy(tok / f, d / f)
    return d


class Engine(serve.Engine):
    """hy_vllm.serve's engine (as hyctl train's keeper starts one), bf16,
    with its start time and resident memory once ready."""

    def __init__(self, model, log_path, dummy=True):
        super().__init__(model, log_path, dtype="bfloat16", dummy=dummy)
        self.rss_mb = sum(rss_kb(p, "VmRSS:") for p in
                          group_pids(self.proc.pid)) / 1024


def run_hy(model, reps, root, changed=(), link=(), mode="auto"):
    """hy's sync with both ranks on the engine's host, then with rank 1 on
    "another host" (c10d): the full form, and a delta after `changed`
    fractions of the values changed. `link`: hy_bench_vllm_sync's
    --remote-netns / --master-addr (scripts/bench-vllm-link.sh)."""
    e = Engine(model, root / "engine-hy.log")
    try:
        def sync(remote, *extra):
            out = subprocess.run(
                [str(SYNC_BIN), "--model-dir", str(model), "--url", e.url,
                 "--engine-pgid", str(e.proc.pid), "--ranks", "2",
                 "--remote-ranks", str(remote), "--reps", str(reps),
                 "--json", *(link if remote else ()), *extra],
                env=dict(os.environ, HY_VLLM_API_KEY=e.key),
                capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"{SYNC_BIN} exited {out.returncode}: "
                                   f"{out.stderr}")
            return json.loads(out.stdout)
        r = sync(0)
        r["engine_start_s"] = e.start_s
        # Rank 1 as if on another host: its piece to rank 0 over c10d.
        r["c10d"] = sync(1)
        r["c10d_delta"] = [sync(1, "--delta", mode, "--changed", str(c))
                           for c in changed]
        return r
    finally:
        e.close()


def run_py(model, reps, root, train_lr=(), link=()):
    """hystate.vllm's rows (bench/py_vllm_sync.py) on an engine of their
    own. With `link` (rank 1 in another namespace), only the 2-rank rows
    with rank 1 there."""
    e = Engine(model, root / "engine-py.log")
    try:
        py = os.environ.get("HY_BUILD_PYTHON", str(SRC / ".venv/bin/python3"))
        path = os.environ.get("PYTHONPATH", "")
        env = dict(os.environ, HY_VLLM_API_KEY=e.key,
                   PYTHONPATH=str(SRC / "build/python")
                   + (":" + path if path else ""))

        def script(name, *extra):
            out = subprocess.run(
                [py, str(SRC / "bench" / name), "--model-dir", str(model),
                 "--url", e.url, "--reps", str(reps), *extra],
                env=env, capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"{name} exited {out.returncode}: "
                                   f"{out.stderr[-3000:]}")
            return json.loads(out.stdout.strip().splitlines()[-1])

        if link:
            # The ranks script takes rank 1's namespace and rank 0's
            # address (rank 1 reaches rank 0 there), not --remote-addr.
            flag = dict(zip(link[::2], link[1::2]))
            return {"ranks": [script(
                "py_vllm_sync_ranks.py",
                "--remote-netns", flag["--remote-netns"],
                "--master-addr", flag["--master-addr"])]}
        res = script("py_vllm_sync.py")
        res["ranks"] = [script("py_vllm_sync_ranks.py"),
                        script("py_vllm_sync_ranks.py", "--two-hosts")]
        if train_lr:
            res["train"] = script("py_vllm_sync_ranks.py",
                                  "--train", *map(str, train_lr))
        return res
    finally:
        e.close()


# verl's colocated way ---------------------------------------------------

def _shapes(model):
    from transformers import AutoConfig, AutoModelForCausalLM
    import torch
    cfg = AutoConfig.from_pretrained(model)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    return [(n, tuple(p.shape)) for n, p in m.named_parameters()]


def _verl_rank(rank, model, reps, port, q):
    import datetime
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    shapes = _shapes(model)
    g = torch.Generator().manual_seed(rank)
    # FSDP2: each parameter's dim 0 split over the ranks.
    pieces = {}
    for n, s in shapes:
        rows = (s[0] + 1) // 2
        t = torch.empty((rows,) + s[1:])
        t.normal_(0, 0.02, generator=g)
        pieces[n] = t
    llm = None
    if rank == 0:
        # vLLM in this process (its own world of one as the default group).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        from vllm import LLM
        llm = LLM(model=str(model), load_format="dummy", dtype="bfloat16",
                  enforce_eager=True, max_model_len=64, seed=0)
    # The trainer's group: Gloo over its own store, beside vLLM's.
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0,
                          timeout=datetime.timedelta(seconds=900))
    pg = dist.ProcessGroupGloo(store, rank, 2,
                               datetime.timedelta(seconds=900))
    tied = "lm_head.weight" not in dict(shapes)

    def gathered():
        for n, s in shapes:
            piece = pieces[n]
            parts = [torch.empty_like(piece) for _ in range(2)]
            pg.allgather([parts], [piece]).wait()
            full = torch.cat(parts)[: s[0]].to(torch.bfloat16)
            yield n, full
            if tied and n == "model.embed_tokens.weight":
                yield "lm_head.weight", full

    times, extra = [], []
    for i in range(reps + 1):
        pg.barrier().wait()
        reset_peak(os.getpid())
        before = rss_kb(os.getpid(), "VmRSS:")
        t0 = time.time()
        if rank == 0:
            llm.collective_rpc("reload_weights", kwargs={
                "weights_iterator": gathered(), "is_checkpoint_format": True})
            llm.reset_prefix_cache()
        else:
            for _ in gathered():
                pass
        pg.barrier().wait()
        if i > 0:
            times.append(time.time() - t0)
            extra.append((rss_kb(os.getpid(), "VmHWM:") - before) / 1024)
    q.put((rank, times, extra))


def run_verl(model, reps):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = serve.free_port()
    procs = [ctx.Process(target=_verl_rank, args=(r, model, reps, port, q))
             for r in range(2)]
    for p in procs:
        p.start()
    res = {}
    while len(res) < 2:
        try:
            r, t, x = q.get(timeout=5)
            res[r] = (t, x)
        except Exception:  # queue.Empty: a rank that died says nothing.
            for p in procs:
                if p.exitcode not in (None, 0):
                    for o in procs:
                        o.kill()
                    raise RuntimeError(f"verl rank exited {p.exitcode}")
    for p in procs:
        p.join()
    return {"sync_s": statistics.median(res[0][0]),
            "rank0_extra_rss_mb": statistics.median(res[0][1]),
            "rank1_extra_rss_mb": statistics.median(res[1][1])}


def run_restart(model, reps, root):
    import torch
    from safetensors.torch import save_file
    shapes = _shapes(model)
    times, writes, starts, rss = [], [], [], []
    for i in range(reps):
        d = root / f"export-{i}"
        shutil.copytree(model, d)
        t0 = time.time()
        g = torch.Generator().manual_seed(i)
        sd = {n: torch.empty(s, dtype=torch.bfloat16).normal_(0, 0.02,
                                                             generator=g)
              for n, s in shapes if n != "lm_head.weight"}
        save_file(sd, str(d / "model.safetensors"))
        del sd
        w = time.time() - t0
        e = Engine(d, root / f"engine-restart-{i}.log", dummy=False)
        times.append(time.time() - t0)
        writes.append(w)
        starts.append(e.start_s)
        rss.append(e.rss_mb)
        e.close()
        shutil.rmtree(d)
    return {"sync_s": statistics.median(times),
            "export_s": statistics.median(writes),
            "engine_start_s": statistics.median(starts),
            "engine_rss_mb": statistics.median(rss)}


def run_demo(iterations, root):
    data = root / "demo-train.jsonl"
    subprocess.run([str(HYCTL), "data", "gen-arith", str(data), "--count",
                    "20000", "--seed", "1", "--ops", "+", "--max-digits", "1"],
                   check=True, capture_output=True)
    out = {}
    for engine in ("hy", "vllm"):
        p = subprocess.run(
            [str(HYCTL), "train", "--config", str(SRC / "configs/demo.yaml"),
             "--data", str(data), "--store", str(root / f"demo-{engine}"),
             "--iterations", str(iterations), "--set",
             f"rollout.engine={engine}", "-o", "json"],
            check=True, capture_output=True, text=True)
        its = [json.loads(l) for l in p.stdout.splitlines()
               if l.startswith('{"iteration"')]
        ms = [j["iteration_ms"] for j in its[3:]]  # After the warm-up.
        out[engine] = {"iteration_ms": statistics.median(ms),
                       "rollout_ms": statistics.median(
                           j["rollout_ms"] for j in its[3:]),
                       "sync_ms": statistics.median(
                           j.get("weight_sync_ms", j["reshard_ms"])
                           for j in its[3:])}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(SHAPES), default="0.5b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--restart-reps", type=int, default=3)
    ap.add_argument("--demo-iterations", type=int, default=30)
    ap.add_argument("--skip", nargs="*", default=[],
                    choices=["hy", "python", "verl", "restart", "demo"])
    ap.add_argument("--changed", type=float, nargs="*",
                    default=[0.01, 0.05, 0.5],
                    help="fractions of values changed for the delta rows")
    ap.add_argument("--delta", choices=["auto", "on"], default="auto",
                    help="rollout.vllm.delta for the delta rows")
    ap.add_argument("--remote-netns", default="",
                    help="the c10d rank's network namespace (a link)")
    ap.add_argument("--master-addr", default="127.0.0.1",
                    help="rank 0's address from --remote-netns")
    ap.add_argument("--remote-addr", default="127.0.0.1",
                    help="the c10d rank's own address in --remote-netns")
    ap.add_argument("--train-lr", type=float, nargs="*",
                    default=[1e-6, 1e-5],
                    help="learning rates of the real-step rows (none: skip)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    link = (["--remote-netns", a.remote_netns, "--master-addr",
             a.master_addr, "--remote-addr", a.remote_addr]
            if a.remote_netns else [])
    if a.reps < 1 or a.restart_reps < 1 or a.demo_iterations < 0:
        ap.error("--reps and --restart-reps must be >= 1")
    root = Path(tempfile.mkdtemp(prefix="hy-vllm-bench-"))
    try:
        model = model_dir(root, a.model)
        res = {"model": a.model, "reps": a.reps}
        if "hy" not in a.skip:
            log("hy ...")
            res["hy"] = run_hy(model, a.reps, root, a.changed, link,
                               a.delta)
        if "python" not in a.skip:
            log("python ...")
            res["python"] = run_py(model, a.reps, root, a.train_lr, link)
        if "verl" not in a.skip:
            log("verl ...")
            res["verl"] = run_verl(model, a.reps)
        if "restart" not in a.skip:
            log("restart ...")
            res["restart"] = run_restart(model, a.restart_reps, root)
        if a.demo_iterations > 0 and "demo" not in a.skip:
            log("demo ...")
            res["demo"] = run_demo(a.demo_iterations, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps(res))
        return
    hy = res.get("hy")
    print(f"weight sync into one vLLM engine, model {a.model}"
          + (f" ({hy['model_mb']:.0f} MiB bf16)" if hy else "")
          + f", 2 trainer ranks, median of {a.reps}")
    print(f"{'way':<10} {'sync s':>9} {'x memcpy':>9} {'x hy':>7} "
          f"{'trainer +MiB':>13} {'engine +MiB':>12}")
    mc = hy["memcpy_s"] if hy else None
    def row(name, s, tr, en):
        print(f"{name:<10} {s:9.3f} {s / mc if mc else float('nan'):9.2f} "
              f"{s / hy['sync_s'] if hy else float('nan'):7.2f} "
              f"{tr:>13} {en:>12}")
    if hy:
        row("hy", hy["sync_s"], f"{hy['rank_extra_rss_mb']:.0f}",
            f"{hy['engine_extra_rss_mb']:.0f}")
        c = hy["c10d"]
        row("hy c10d", c["sync_s"], f"{c['rank_extra_rss_mb']:.0f}",
            f"{c['engine_extra_rss_mb']:.0f}")
    if "verl" in res:
        v = res["verl"]
        row("verl", v["sync_s"],
            f"{v['rank0_extra_rss_mb']:.0f}/{v['rank1_extra_rss_mb']:.0f}",
            "(in rank 0)")
    if "restart" in res:
        r = res["restart"]
        row("restart", r["sync_s"], "-", f"{r['engine_rss_mb']:.0f} total")
    if hy:
        row("memcpy", hy["memcpy_s"], "-", "-")
    if hy and hy["c10d_delta"]:
        full = hy["c10d"]
        print(f"rank 1 over c10d{' (' + a.remote_netns + ')' if link else ''}"
              f": full bf16 against rollout.vllm.delta {a.delta} after a "
              f"fraction of the values changed")
        print(f"{'changed':>8} {'wire MiB':>9} {'sync s':>9} {'x full':>7}")
        print(f"{'full':>8} {full['wire_mb']:9.2f} {full['sync_s']:9.3f} "
              f"{1:7.2f}")
        for d in hy["c10d_delta"]:
            print(f"{d['changed']:8.0%} {d['wire_mb']:9.2f} "
                  f"{d['sync_s']:9.3f} {d['sync_s'] / full['sync_s']:7.2f}")
    p = res.get("python", {})
    if "rows" in p:
        print(f"hystate.vllm from one process ({p['model_mb']:.0f} MiB): "
              f"full push against a delta push")
        print("(write: the compare and rewrite of the file; engine: the "
              "update requests, the engine's reload)")
        print(f"{'change':<11} {'tensors':>9} {'MiB':>7} {'full s':>7} "
              f"{'write':>6} {'engine':>6} {'delta s':>7} {'write':>6} "
              f"{'engine':>6} {'x full':>7}")
        for r in p["rows"]:
            print(f"{r['kind']:<11} {r['changed_tensors']:4.0f}/"
                  f"{r['tensors']:<4} {r['changed_mb']:7.1f} "
                  f"{r['full_s']:7.3f} {r['full_write_s']:6.3f} "
                  f"{r['full_engine_s']:6.3f} {r['delta_s']:7.3f} "
                  f"{r['delta_write_s']:6.3f} {r['delta_engine_s']:6.3f} "
                  f"{r['delta_s'] / r['full_s']:7.2f}")
    if "python" in res:
        v = res["verl"]["sync_s"] if "verl" in res else None
        print("hystate.vllm from 2 ranks of DTensor halves: full push "
              "against a delta push after a fraction of the values changed"
              + ("" if v is None else
                 "; x verl: against verl's colocated sync of the same 2 "
                 f"ranks (all-gather, then vLLM's reload_weights: {v:.3f} s)"))
        print(f"{'rank 1':<9} {'changed':>7} {'full s':>7} {'wire MiB':>8} "
              f"{'delta s':>7} {'wire MiB':>8} {'engine':>6} {'x full':>7}"
              + ("" if v is None else f" {'full x verl':>11} "
                 f"{'delta x verl':>12}"))
        for ranks in p["ranks"]:
            where = "other" if ranks["two_hosts"] else "same"
            for r in ranks["rows"]:
                print(f"{where + ' host':<9} {r['changed']:7.0%} "
                      f"{r['full_s']:7.3f} {r['full_wire_mb']:8.1f} "
                      f"{r['delta_s']:7.3f} {r['delta_wire_mb']:8.1f} "
                      f"{r['delta_engine_s']:6.3f} "
                      f"{r['delta_s'] / r['full_s']:7.2f}"
                      + ("" if v is None else
                         f" {r['full_s'] / v:11.2f} {r['delta_s'] / v:12.2f}"))
        if "train" in p:
            t = p["train"]
            print("real AdamW steps (one process, float32 master weights): "
                  "the engine's bf16 values each step changed, and what a "
                  "rank on another host would send for them "
                  f"(full: {t['model_mb']:.0f} MiB)")
            print(f"{'lr':>7} {'step':>4} {'changed':>8} {'wire MiB':>8} "
                  f"{'x full':>7} {'push s':>6} {'tensors':>9}")
            for r in t["steps"]:
                print(f"{r['lr']:7.0e} {r['step']:4d} {r['changed']:8.2%} "
                      f"{r['wire_mb']:8.1f} "
                      f"{r['wire_mb'] / t['model_mb']:7.3f} "
                      f"{r['push_s']:6.2f} "
                      f"{r['changed_tensors']:4d}/{r['tensors']:<4d}")
    if "demo" in res:
        d = res["demo"]
        print(f"demo iteration (median after 3): hy rollout "
              f"{d['hy']['iteration_ms']:.0f} ms, vLLM "
              f"{d['vllm']['iteration_ms']:.0f} ms "
              f"(rollout {d['hy']['rollout_ms']:.0f} vs "
              f"{d['vllm']['rollout_ms']:.0f} ms, sync "
              f"{d['hy']['sync_ms']:.1f} vs {d['vllm']['sync_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
