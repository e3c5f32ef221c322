"""GRPO with plain PyTorch FSDP2 and a vLLM engine, kept consistent by hy:
rollouts come from a vLLM engine, the trained weights go into it after
every step (hystate.vllm.EngineSync), and the run checkpoints through
torch.distributed.checkpoint into hy's store (hystate.dcp), so that a run
killed at any moment continues from its last committed step.

    torchrun --nproc-per-node 2 examples/fsdp2_vllm_grpo.py \\
        --model DIR --steps N --ckpt DIR [--json]

--model: a Hugging Face Llama directory (SmolLM2-135M-Instruct:
scripts/fetch-model.sh smollm2-135m-instruct); default: that model in
models/ or ~/.cache/hy/models/ if there, else "tiny", a small random Llama
(transformers' LlamaConfig, hy's demo tokenizer) that runs in seconds.
Run it again with the same --ckpt after a kill (kill -9 of torchrun and its
ranks) and it resumes from the last committed step. The engine runs in
vLLM's interpreter ($HY_VLLM_PYTHON, default .venv-vllm/bin/python3, as
scripts/install-deps.sh makes it); the ranks need hystate (the build's
python-installed/ on PYTHONPATH) and transformers. CPU and gloo here; on
GPUs use nccl.

The task: "a+b=" prompts (in the model's chat template when it has one);
the reward is 1 when the last number of the response is a+b, 0.1 for any
other number (so that a random model has a signal), else 0. Each step is
one on-policy GRPO update: G samples per prompt, advantages normalized
within each prompt's group, loss -A * mean log-prob of the response.
Rank 0 prints one line per step (--json: one JSON object a line): mean
reward, rollout, train and sync seconds, the bytes the engine was sent, the
engine's weight version, checkpoint blocking seconds (save and gc; the
newest --keep-last steps are kept) and the step's seconds.
"""

import argparse
import importlib
import json
import os
import random
import re
import shutil
import signal
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                     set_state_dict)
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save
from torch.distributed.fsdp import fully_shard
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig,
                          LlamaForCausalLM)

import hystate
from hystate.dcp import HyStorageReader, HyStorageWriter
from hystate.vllm import EngineSync

SRC = Path(__file__).resolve().parent.parent
# hy_vllm.serve starts hy's vLLM engines (it imports no vLLM itself).
sys.path.append(str(SRC / "python"))
serve: Any = importlib.import_module("hy_vllm.serve")

VLLM_PYTHON = os.environ.get("HY_VLLM_PYTHON",
                             str(SRC / ".venv-vllm" / "bin" / "python3"))
SMOLLM2 = "smollm2-135m-instruct"
# (prompt ids, response ids, reward, index of the prompt in the batch)
Sample = Tuple[List[int], List[int], float, int]


def find_model(arg: str) -> Optional[Path]:
    """The model directory, or None for the tiny random Llama."""
    if arg == "tiny":
        return None
    if arg:
        return Path(arg)
    for d in (SRC / "models" / SMOLLM2,
              Path.home() / ".cache" / "hy" / "models" / SMOLLM2):
        if (d / "config.json").exists():
            return d
    return None


def tiny_llama(path: Path, rank: int) -> Any:
    """A small random Llama (head size 32: vLLM's CPU attention takes no
    smaller) with hy's byte-level demo tokenizer; rank 0 saves it to
    `path` (vLLM reads its config and tokenizer)."""
    cfg = LlamaConfig(vocab_size=272, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=True, bos_token_id=None,
                      eos_token_id=258, pad_token_id=256)
    torch.manual_seed(0)  # The same weights on every rank.
    model = LlamaForCausalLM(cfg)
    if rank == 0 and not (path / "config.json").exists():
        model.save_pretrained(path)
        for f in (SRC / "configs" / "demo-tokenizer").iterdir():
            shutil.copy(f, path / f.name)
    return model


def prompts(tok: Any, step: int, count: int,
            digits: int) -> List[Tuple[List[int], int]]:
    """`count` addition prompts of `step` (the same after a resume): their
    token ids and answers."""
    rng = random.Random(step)
    out = []
    for _ in range(count):
        a, b = rng.randrange(10 ** digits), rng.randrange(10 ** digits)
        text = f"{a}+{b}="
        if tok.chat_template:
            text = tok.apply_chat_template([{"role": "user", "content": text}],
                                           add_generation_prompt=True,
                                           tokenize=False)
        out.append((tok(text, add_special_tokens=False)["input_ids"], a + b))
    return out


def reward(text: str, answer: int) -> float:
    numbers = re.findall(r"-?\d+", text)
    if not numbers:
        return 0.0
    return 1.0 if int(numbers[-1]) == answer else 0.1


def rollout(engine: Any, batch: List[Tuple[List[int], int]], group: int,
            max_tokens: int, temperature: float, step: int) -> List[Sample]:
    """G sampled responses per prompt from the engine: one request per
    prompt, all at once (vLLM batches them), seeded by step and prompt
    (vLLM seeds a request's G samples seed, seed+1, ...)."""
    def ask(i: int) -> List[Dict[str, Any]]:
        reply = engine.request("/v1/completions", {
            "prompt": batch[i][0], "n": group, "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": (step * len(batch) + i) * group,
            "return_token_ids": True}, timeout=600)
        return sorted(reply["choices"], key=lambda c: int(c["index"]))
    with ThreadPoolExecutor(len(batch)) as pool:
        replies = list(pool.map(ask, range(len(batch))))
    return [(batch[i][0], c["token_ids"], reward(c["text"], batch[i][1]), i)
            for i, choices in enumerate(replies) for c in choices]


def advantages(samples: List[Sample], group: int) -> torch.Tensor:
    """GRPO: each reward less its group's mean, over the group's std."""
    r = torch.tensor([s[2] for s in samples]).view(-1, group)
    return ((r - r.mean(1, keepdim=True)) /
            (r.std(1, keepdim=True) + 1e-4)).view(-1)


def policy_loss(model: Any, samples: List[Sample], adv: torch.Tensor,
                pad_id: int) -> Any:
    """-A * (mean log-prob of the response tokens), over this rank's
    samples. One update per rollout (on-policy): PPO's ratio is 1 and its
    gradient the log-prob's."""
    seqs = [p + r for p, r, _, _ in samples]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id)
    attn = torch.zeros_like(ids)
    resp = torch.zeros(len(seqs), width - 1)
    for i, (p, r, _, _) in enumerate(samples):
        ids[i, :len(p) + len(r)] = torch.tensor(p + r)
        attn[i, :len(p) + len(r)] = 1
        resp[i, len(p) - 1:len(p) + len(r) - 1] = 1  # Predicts r's tokens.
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(
        -1, ids[:, 1:, None]).squeeze(-1)
    mean = (logp * resp).sum(1) / resp.sum(1).clamp(min=1)
    return -(adv * mean).mean()


def kill_stale_engine(pid_file: Path) -> None:
    """The engine runs in a session of its own (serve.Engine), so a kill -9
    of torchrun and its ranks leaves it running: end the one a killed run
    left, and remove the shared memory vLLM then leaves in /dev/shm."""
    try:
        pid = int(pid_file.read_text())
        alive = os.getpgid(pid) == pid and b"vllm" in Path(
            f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if alive:
        seen = serve.mapped_segments(pid)
        os.killpg(pid, signal.SIGKILL)
        serve.reclaim_segments(pid, seen)
        print(f"ended the engine a killed run left (pid {pid})",
              file=sys.stderr, flush=True)


def say(a: argparse.Namespace, row: Dict[str, Any], text: str) -> None:
    """One line on rank 0: `row` as JSON with --json, else `text`."""
    print(json.dumps(row) if a.json else text, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="", help='a directory, or "tiny"')
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--ckpt", required=True, help="hy run root (resumed)")
    ap.add_argument("--ckpt-every", type=int, default=1)
    ap.add_argument("--keep-last", type=int, default=2,
                    help="checkpointed steps kept (0: all)")
    ap.add_argument("--prompts", type=int, default=8, help="per step")
    ap.add_argument("--group", type=int, default=4, help="samples a prompt")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--digits", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--engine-dtype", default="bfloat16",
                    choices=["bfloat16", "float32"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt = Path(a.ckpt)
    side = ckpt / "engine"  # The engine's log, pid and (tiny) model.
    side.mkdir(parents=True, exist_ok=True)
    model_dir = find_model(a.model)
    if model_dir is None:
        model_dir = side / "tiny-llama"
        model = tiny_llama(model_dir, rank)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir,
                                                     dtype=torch.float32)
    dist.barrier()  # Rank 0 has saved the tiny model's directory.
    tok: Any = AutoTokenizer.from_pretrained(model_dir)

    # Rank 0 starts the engine (python -m hy_vllm.serve: hy's worker
    # extension and weight-transfer backend, dummy weights until the first
    # push) in vLLM's interpreter. It takes 30-60 s: in a thread, while the
    # ranks load the checkpoint.
    starting: Optional["Future[Any]"] = None
    if rank == 0:
        if not Path(VLLM_PYTHON).exists():
            sys.exit(f"no vLLM interpreter at {VLLM_PYTHON} (set "
                     "HY_VLLM_PYTHON or run scripts/install-deps.sh)")
        kill_stale_engine(side / "engine.pid")
        # torchrun gives each rank OMP_NUM_THREADS=1; the engine samples
        # while the ranks wait for it, so it gets every core.
        os.environ["OMP_NUM_THREADS"] = str(os.cpu_count())
        width = 2 * max(len(p) for p, _ in prompts(tok, 0, 64, a.digits))
        starting = ThreadPoolExecutor(1).submit(
            serve.Engine, model_dir, side / "engine.log",
            dtype=a.engine_dtype, python=VLLM_PYTHON,
            max_model_len=width + a.max_tokens,
            # Room for every sample's prefill in one step (serve.command).
            max_num_batched_tokens=max(2048, a.prompts * a.group *
                                       (width + a.max_tokens)))

    # FSDP2: each decoder layer and the root sharded over the ranks
    # (DTensor parameters and optimizer state).
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)

    # Resume: DCP loads the newest committed step of the hy run root into
    # the sharded model and optimizer, each rank reading only its shards.
    # A save that a kill interrupted was never committed (on every rank's
    # store or on none): hystate.open(...).steps() does not list it.
    start = 0
    if (ckpt / "dcp").is_dir() and hystate.open(str(ckpt)).steps():
        msd, osd = get_state_dict(model, opt)
        state: Dict[str, Any] = {"model": msd, "optim": osd,
                                 "trainer": {"step": -1}}
        dcp_load(state, storage_reader=HyStorageReader(ckpt))
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        start = state["trainer"]["step"]
        if rank == 0:
            say(a, {"resumed": start}, f"resumed at step {start}")

    # The engine's URL and key, from rank 0 to every rank.
    engine: Any = None
    info: List[Any] = [None]
    if starting is not None:
        engine = starting.result()
        (side / "engine.pid").write_text(str(engine.proc.pid))
        info = [(engine.url, engine.key)]
        say(a, {"engine_start_s": engine.start_s},
            f"engine up in {engine.start_s:.0f} s at {engine.url}")
    dist.broadcast_object_list(info, src=0)
    url, key = info[0]
    # EngineSync: every rank writes its own shards into one shared-memory
    # file (no rank gathers the model), then rank 0 tells the engine which
    # tensors changed. The first push is the whole model, the next ones
    # deltas. Its dtype is the engine's.
    sync = EngineSync([url], api_key=key, dtype=a.engine_dtype)
    try:
        # The engine starts on dummy weights; step start+1's rollouts
        # need step start's.
        report = sync.push(model.state_dict(), start)
        first = report.engines[0]
        if rank == 0:
            say(a, {"pushed": start, "sync_s": report.seconds,
                    "sync_bytes": first.bytes, "sync_mode": first.mode},
                f"engine at step {start}: {first.mode} push of "
                f"{first.bytes} bytes in {report.seconds:.3f} s")
        for step in range(start + 1, a.steps + 1):
            t0 = time.perf_counter()
            # Rollouts: rank 0 asks the engine (which holds step-1's
            # weights); every rank gets the whole batch and trains on its
            # share of it.
            batch: List[Any] = [None]
            if rank == 0:
                batch = [rollout(engine, prompts(tok, step, a.prompts,
                                                 a.digits), a.group,
                                 a.max_tokens, a.temperature, step)]
            dist.broadcast_object_list(batch, src=0)
            samples: List[Sample] = batch[0]
            t_roll = time.perf_counter() - t0
            adv = advantages(samples, a.group)
            mine = list(range(rank, len(samples), world))
            loss = policy_loss(model, [samples[i] for i in mine], adv[mine],
                               tok.pad_token_id or 0)
            loss.backward()  # FSDP2 averages the gradients over the ranks.
            opt.step()
            opt.zero_grad()
            t_train = time.perf_counter() - t0 - t_roll

            # Weight sync: every rank calls push with its sharded state
            # dict; the engine holds `step`'s weights when it returns.
            # sync_s: the whole push (writes, the engine's reload);
            # sync_bytes: what the engine was sent (the changed tensors).
            report = sync.push(model.state_dict(), step)
            pushed = report.engines[0]
            version = None
            if rank == 0:  # The engine's own word on what it holds.
                version = engine.request("/weight_info").get("weight_version")
                assert version == str(step), (version, step)

            # Checkpoint: DCP saves model, optimizer and step into the hy
            # run root: each rank writes only its shards, chunks unchanged
            # since the last save are not written again, and the step is
            # committed on every rank's store or on none. Then rank 0
            # drops all but the newest --keep-last steps from every rank's
            # store (gc: chunks no kept step uses). Both block training
            # for as long as they take (ckpt_blocking_s).
            ckpt_s = None
            if step % a.ckpt_every == 0 or step == a.steps:
                tc = time.perf_counter()
                msd, osd = get_state_dict(model, opt)
                dcp_save({"model": msd, "optim": osd,
                          "trainer": {"step": step}},
                         storage_writer=HyStorageWriter(ckpt))
                if rank == 0 and a.keep_last > 0:
                    hystate.open(str(ckpt)).gc(keep_last=a.keep_last)
                ckpt_s = time.perf_counter() - tc
            if rank == 0:
                row = {"step": step,
                       "reward": sum(s[2] for s in samples) / len(samples),
                       "loss": loss.item(), "rollout_s": t_roll,
                       "train_s": t_train, "sync_s": report.seconds,
                       "sync_bytes": pushed.bytes, "sync_mode": pushed.mode,
                       "engine_version": version, "ckpt_blocking_s": ckpt_s,
                       "step_s": time.perf_counter() - t0}
                say(a, row, f"step {step} reward {row['reward']:.3f} "
                    f"rollout_s {t_roll:.2f} train_s {t_train:.2f} "
                    f"sync_s {report.seconds:.3f} sync_bytes {pushed.bytes} "
                    f"({pushed.mode}) engine_version {version} "
                    "ckpt_blocking_s " +
                    ("-" if ckpt_s is None else f"{ckpt_s:.3f}") +
                    f" step_s {row['step_s']:.2f}")
        if rank == 0:
            say(a, {"done": a.steps}, f"done: {a.steps} steps in {ckpt}")
    finally:
        sync.close()
        if engine is not None:
            engine.close()  # Its whole process group, and its /dev/shm.
            (side / "engine.pid").unlink(missing_ok=True)
    dist.destroy_process_group()
    # As in fsdp2_dcp.py: PyTorch 2.13's interpreter teardown after FSDP2
    # over gloo aborts now and then; everything is saved by now.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
