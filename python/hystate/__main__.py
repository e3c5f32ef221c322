"""python -m hystate: what the package does and its API in a few lines;
--version: the installed package's version and where its extension module
lives."""

import argparse
import inspect
import sys

from . import __version__, _hy


def summary() -> str:
    """The package's first paragraph and one line per public name."""
    import hystate
    doc = inspect.getdoc(hystate) or ""
    lines = [doc.split("\n\n")[0], "", "API (help(hystate.NAME) for more):"]
    for name in hystate.__all__:
        obj = getattr(hystate, name)
        text = " ".join((inspect.getdoc(obj) or "").split())
        first = text.split(". ")[0].rstrip(".") + "."
        if len(first) > 100:
            first = first[:97] + "..."
        lines.append(f"  hystate.{name:<18} {first}")
    lines += ["  hystate.dcp.HyStorageWriter / HyStorageReader  "
              "torch.distributed.checkpoint storage on hy's stores",
              "  hystate.vllm.EngineSync  a model's weights into running "
              "vLLM engines by step, only what changed",
              "", "Reference: docs/api/index.html in the repository; "
              "examples: examples/."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hystate",
                                description="hystate: hy's Python package")
    p.add_argument("--version", action="store_true",
                   help="print the version and the extension module's path")
    args = p.parse_args(argv)
    if args.version:
        print(f"hystate {__version__} ({_hy.__file__})")
        return 0
    print(summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
