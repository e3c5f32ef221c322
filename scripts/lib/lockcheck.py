"""Compares a Python environment with a lock file (requirements/*.lock).

A lock lists every distribution of an environment's tree, each as
``name==version`` followed by its ``--hash=sha256:`` lines (what
scripts/lock-deps.sh writes, what ``pip install --require-hashes``
takes). This script reads the lock and the environment it runs in
(``importlib.metadata``, the running interpreter's site-packages) and
says what differs: a locked distribution missing or at another version,
and a distribution the lock does not name (extra). Standard library
only: it runs in a venv before anything is installed there.

Usage:
  python lockcheck.py check LOCK   exit 0 when the environment is the
                                   lock exactly, else 1 with the
                                   differences, one a line
  python lockcheck.py extras LOCK  prints the extras' names, one a line
                                   (what install-deps uninstalls)
"""

import re
import sys
from importlib import metadata

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def normalize(name):
    """PEP 503's normalized name: runs of -_. become one -, lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path):
    """{normalized name: version} of every pin in the lock file."""
    pins = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = _PIN.match(line)
            if m:
                pins[normalize(m.group(1))] = m.group(2)
    if not pins:
        raise SystemExit(f"lockcheck: {path}: no name==version line")
    return pins


def installed():
    """{normalized name: version} of the distributions on sys.path."""
    have = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            have.setdefault(normalize(name), dist.version)
    return have


def differences(pins, have):
    """Lines naming each missing, other-version and extra distribution."""
    out = []
    for name, version in sorted(pins.items()):
        if name not in have:
            out.append(f"missing {name}=={version}")
        elif have[name] != version:
            out.append(f"other   {name}=={have[name]} (lock: {version})")
    for name in sorted(set(have) - set(pins)):
        out.append(f"extra   {name}=={have[name]}")
    return out


def main(argv):
    if len(argv) != 3 or argv[1] not in ("check", "extras"):
        print(__doc__, file=sys.stderr)
        return 2
    pins = read_lock(argv[2])
    have = installed()
    if argv[1] == "extras":
        for name in sorted(set(have) - set(pins)):
            print(name)
        return 0
    diff = differences(pins, have)
    for line in diff:
        print(f"lockcheck: {sys.prefix}: {line}")
    if not diff:
        print(f"lockcheck: {sys.prefix} is {argv[2]} exactly "
              f"({len(pins)} distributions)")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
