"""Save a training loop's state every few steps; after a stop, resume from
the newest saved step and go on as if nothing had happened.

    python examples/save_and_resume.py --dir /tmp/ckpt --steps 6
    python examples/save_and_resume.py --dir /tmp/ckpt --steps 10  # from 6

Model, optimizer (Adam's moments and step counts) and plain values (the
step, the data position) go into one state dict; hystate.save commits it
as a step (a second save writes only the chunks that changed), and
hystate.load fills the same structure in place.
"""

import argparse
import os
from typing import Any, Dict, Optional, Tuple

import torch

import hystate


def batch(step: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s data: the same on a resumed run as on an unbroken one."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(64, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="checkpoint directory")
    ap.add_argument("--steps", type=int, default=10, help="train up to here")
    ap.add_argument("--save-every", type=int, default=2)
    a = ap.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    # Adam makes its moments at the first step; make them now (a step with
    # zero gradients changes nothing) so that a load can fill them in place.
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad()

    state: Dict[str, Any] = {"model": model.state_dict(),
                             "optim": opt.state_dict(), "step": 0}
    if os.path.isdir(a.dir) and hystate.open(a.dir).steps():
        step = hystate.load(a.dir, state)  # The newest committed step.
        opt.load_state_dict(state["optim"])  # Its plain values, too.
        print(f"resumed at step {step}")
    loss: Optional[torch.Tensor] = None
    for step in range(state["step"] + 1, a.steps + 1):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        if step % a.save_every == 0 or step == a.steps:
            state = {"model": model.state_dict(), "optim": opt.state_dict(),
                     "step": step}
            hystate.save(a.dir, state, step=step)
    if loss is not None:
        print(f"step {a.steps} loss {loss.item():.9f}")


if __name__ == "__main__":
    main()
