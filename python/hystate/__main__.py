"""python -m hystate --version: the installed package's version and where its
extension module lives."""

import argparse
import sys

from . import __version__, _hy


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hystate",
                                description="hystate: hy's Python package (versioned, "
                                "checksummed checkpoints of PyTorch and numpy "
                                "state across ranks; see help(hystate))")
    p.add_argument("--version", action="store_true",
                   help="print the version and the extension module's path")
    args = p.parse_args(argv)
    if args.version:
        print(f"hystate {__version__} ({_hy.__file__})")
        return 0
    p.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
