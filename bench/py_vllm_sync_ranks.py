"""hystate.vllm.EngineSync from 2 ranks holding DTensor halves (Shard(0)
of every tensor, as FSDP2 shards), rank 1 on this host or on another one
(--two-hosts: its own namespaces, another hostname and an empty /dev/shm,
so what it holds crosses c10d to rank 0). For changes of 1%, 5% and 50% of
the values of every tensor: a delta push against a full push of the same
state (delta=False), median of --reps. Prints one JSON object (rank 0).

--train LR [LR ...] measures real optimizer steps instead, in this one
process (the 2-rank FSDP2 run of the 0.5B model does not fit beside the
engine in 24 GiB): the model in float32, AdamW at each LR on a
language-model loss over random tokens, --steps steps, a delta push after
each; per step the fraction of the engine's (bf16) values that changed,
and what a rank on another host would send for them by EngineSync's rule
(4 bytes a changed value: a 16-bit gap and the bf16 value, or the tensor
whole where that is less; the gap coding's added indices, one per 65536
values at most, are left out).

  python3 bench/py_vllm_sync_ranks.py --model-dir D --url U [--two-hosts]
      [--remote-netns NS --master-addr A0]
  python3 bench/py_vllm_sync_ranks.py --model-dir D --url U --train 1e-6 1e-5
      [--steps 4]

with the engine's key in $HY_VLLM_API_KEY, the build's interpreter
(hystate on the path), and the engine on this host. The link is the
loopback, unless --remote-netns puts rank 1 in that network namespace
(another host: implies --two-hosts), reaching rank 0 at --master-addr,
as scripts/bench-vllm-link.sh sets up over a link tc shapes; both ranks'
Gloo then uses their namespace's eth0.
"""

import argparse
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import torch

from py_vllm_sync import IDLE_S, change  # This directory's.

FRACTIONS = [0.01, 0.05, 0.5]


def launch(a):
    with socket.socket() as s:
        s.bind((a.master_addr, 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in range(2):
        cmd = [sys.executable, __file__, "--model-dir", a.model_dir, "--url",
               a.url, "--reps", str(a.reps), "--rank", str(rank)]
        if rank == 1 and a.two_hosts:
            cmd = ["unshare", "-rmu", "sh", "-c",
                   "mount -t tmpfs none /dev/shm && hostname hy-bench-b && "
                   'exec "$0" "$@"', *cmd]
            if a.remote_netns:
                cmd = ["ip", "netns", "exec", a.remote_netns, *cmd]
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR=a.master_addr, MASTER_PORT=port,
                   OMP_NUM_THREADS="1")
        if a.remote_netns:
            env["GLOO_SOCKET_IFNAME"] = "eth0"
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      text=True))
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"a rank failed: {[p.returncode for p in procs]}")
    print(outs[0].strip().splitlines()[-1])


def sharded_state(model_dir, rank):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from transformers import AutoConfig, AutoModelForCausalLM
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    state, memo = {}, {}
    for name, t in model.state_dict().items():
        if t.data_ptr() not in memo:  # Tied tensors stay one DTensor.
            local = t.chunk(2)[rank].clone()
            memo[t.data_ptr()] = DTensor.from_local(
                local, mesh, [Shard(0)], run_check=False, shape=t.shape,
                stride=t.stride())
        state[name] = memo[t.data_ptr()]
    return state


def local_parts(state):
    """Each DTensor's local part once (tied ones share it), non-empty."""
    parts = {}
    for name, t in state.items():
        local = t.to_local()
        if local.numel() and all(p.data_ptr() != local.data_ptr()
                                 for p in parts.values()):
            parts[name] = local
    return parts


def rank_main(a):
    from hystate.vllm import EngineSync
    state = sharded_state(a.model_dir, a.rank)
    gen = torch.Generator().manual_seed(1 + a.rank)
    out = {"two_hosts": None, "rows": []}
    step = 0
    with EngineSync([a.url], delta=False) as full_sync, \
            EngineSync([a.url]) as delta_sync:
        for frac in FRACTIONS:
            rows = {k: [] for k in ("delta", "full", "delta_wire",
                                    "full_wire", "delta_engine",
                                    "full_engine")}
            for _ in range(a.reps):
                step += 1
                delta_sync.push(state, step)
                parts = local_parts(state)
                change(parts, list(parts), frac, gen)
                for sync, kind in ((delta_sync, "delta"), (full_sync, "full")):
                    step += 1
                    time.sleep(IDLE_S)
                    r = sync.push(state, step)
                    rows[kind].append(r.seconds)
                    rows[kind + "_wire"].append(r.wire_bytes)
                    rows[kind + "_engine"].append(r.engines[0].seconds)
            out["model_mb"] = r.model_bytes / 2**20
            out["two_hosts"] = r.wire_bytes > 0
            out["rows"].append({"changed": frac, **{
                k + ("_mb" if "wire" in k else "_s"):
                statistics.median(v) / (2**20 if "wire" in k else 1)
                for k, v in rows.items()}})
    if a.rank == 0:
        print(json.dumps(out))


def train_main(a):
    """Real AdamW steps (see the module)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from hystate.vllm import EngineSync
    config = AutoConfig.from_pretrained(a.model_dir)
    out = {"steps": []}
    step = 0
    for lr in a.train:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        # One parameter at a time: foreach's temporaries of the whole
        # model do not fit beside the engine on a small machine.
        opt = torch.optim.AdamW(model.parameters(), lr=lr, foreach=False)
        gen = torch.Generator().manual_seed(7)
        state = model.state_dict()
        names = [n for n in state if n != "lm_head.weight"]  # Tied.

        def engine_values():
            return [state[n].detach().to(torch.bfloat16).view(torch.int16)
                    for n in names]

        with EngineSync([a.url]) as sync:
            step += 1
            sync.push(state, step)
            before = engine_values()
            for k in range(a.steps):
                ids = torch.randint(0, config.vocab_size, (1, 32),
                                    generator=gen)
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad()
                step += 1
                time.sleep(IDLE_S)
                r = sync.push(state, step)
                after = engine_values()
                changed = total = wire = 0
                for x, y in zip(before, after):
                    c = int((x != y).sum())
                    changed += c
                    total += x.numel()
                    # What a rank on another host sends for it (_collect).
                    wire += min(c * 4, x.numel() * 2) if c else 0
                before = after
                out["model_mb"] = r.model_bytes / 2**20
                out["steps"].append({
                    "lr": lr, "step": k + 1, "changed": changed / total,
                    "wire_mb": wire / 2**20, "push_s": r.seconds,
                    "mode": r.engines[0].mode,
                    "changed_tensors": r.changed_tensors,
                    "tensors": r.tensors})
        del model, opt, state, before, after
        gc.collect()
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--two-hosts", action="store_true")
    ap.add_argument("--remote-netns", default="")
    ap.add_argument("--master-addr", default="127.0.0.1")
    ap.add_argument("--train", type=float, nargs="*", default=[])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.two_hosts = a.two_hosts or bool(a.remote_netns)
    if a.train:
        train_main(a)
    elif a.rank < 0:
        launch(a)
    else:
        rank_main(a)


if __name__ == "__main__":
    main()
