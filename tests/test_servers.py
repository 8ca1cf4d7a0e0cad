"""retain.servers: real servers on free loopback ports, stopped after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from retain.daemon import stop_signals_held
from retain.errors import ServerStartError
from retain.servers import (
    PostgresServer,
    RedisCluster,
    RedisServer,
    SeaweedServer,
    find_postgres_bin,
    find_redis_server,
)


class TestRedisServer:
    def test_starts_on_loopback_never_6379(self):
        """A server comes up on a free loopback port, persists nothing, and is gone after the block."""
        with RedisServer() as server:
            assert server.port != 6379 and 20000 <= server.port < 30000
            conn = server.client()
            assert conn.ping()
            assert conn.config_get("save")["save"] == ""
            assert conn.config_get("appendonly")["appendonly"] == "no"
            conn.close()
        with pytest.raises(redis.exceptions.ConnectionError):
            redis.Redis(host="127.0.0.1", port=server.port, socket_connect_timeout=1).ping()

    def test_stop_and_start_keep_the_port(self):
        """stop() then start() brings the server back on the same port (for failure tests)."""
        with RedisServer() as server:
            port = server.port
            server.stop()
            server.start()
            assert server.port == port and server.client().ping()

    def test_start_on_a_running_server_starts_nothing(self):
        """start() and then the server as a context manager (which starts it too) run one process, and none
        is left after the block."""
        server = RedisServer().start()
        process = server._child.process
        with server:
            assert server._child.process is process and server.client().ping()
        assert process.poll() is not None

    def test_start_after_the_server_died_lets_go_of_the_dead_one(self):
        """A server killed under a test and started again: the dead process's log file is closed, a new process
        answers on the same port."""
        with RedisServer() as server:
            dead, port = server._child, server.port
            dead.process.kill()
            dead.process.wait()
            server.start()
            assert dead._log_file.closed
            assert server._child is not dead and server.port == port and server.client().ping()

    def test_config_is_applied(self):
        """config= passes server settings at start."""
        with RedisServer(config={"stream-node-max-entries": "7"}) as server:
            assert server.client().config_get("stream-node-max-entries")["stream-node-max-entries"] == "7"

    def test_binary_override(self, monkeypatch):
        """RETAIN_REDIS_SERVER names the binary; a missing one fails with a clear error."""
        monkeypatch.setenv("RETAIN_REDIS_SERVER", "/nonexistent/redis-server")
        assert find_redis_server() == "/nonexistent/redis-server"
        with pytest.raises((ServerStartError, FileNotFoundError)):
            RedisServer().start()


class TestRedisCluster:
    def test_three_masters_cover_every_slot(self, redis_cluster):
        """The test cluster has three masters and serves all 16384 slots."""
        conn = redis_cluster.client()
        info = conn.cluster_info()
        assert info["cluster_state"] == "ok" and int(info["cluster_slots_assigned"]) == 16384
        assert len(conn.get_primaries()) == 3
        conn.close()

    def test_needs_a_master(self):
        """A cluster of no masters is refused."""
        with pytest.raises(ValueError, match="at least one master"):
            RedisCluster(masters=0)


class TestValkeyServer:
    def test_a_real_valkey_on_loopback(self, valkey_server):
        """The Valkey fixture is a real valkey-server on a free loopback port that speaks streams."""
        assert valkey_server.port != 6379 and 20000 <= valkey_server.port < 30000
        with valkey_server.client() as conn:
            assert "valkey_version" in conn.info("server")
            conn.xadd("emq:{q}:stream:s", {"k": "v"})
            assert conn.xlen("emq:{q}:stream:s") == 1


class TestPostgresServer:
    def test_a_real_postgres_never_5432(self, postgres_server):
        """The PostgreSQL fixture listens on a free loopback port (never 5432) and makes databases on demand."""
        assert postgres_server.port != 5432 and 20000 <= postgres_server.port < 30000
        url = postgres_server.create_database("servers_test")
        assert url == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/servers_test"
        listed = postgres_server.psql("SELECT datname FROM pg_database")
        assert "servers_test" in listed.stdout

    def test_stop_start_keeps_data_and_port_then_is_removed(self):
        """stop() then start() keeps the port and the cluster; leaving the block removes every file."""
        with PostgresServer() as server:
            port = server.port
            server.create_database("kept")
            server.stop()
            server.start()
            assert server.port == port and "kept" in server.psql("SELECT datname FROM pg_database").stdout
        assert not server.directory.exists()

    def test_binary_override(self, monkeypatch, tmp_path):
        """RETAIN_POSTGRES_BIN names the directory; one without initdb and postgres is refused, naming it."""
        monkeypatch.setenv("RETAIN_POSTGRES_BIN", str(tmp_path))
        with pytest.raises(ServerStartError, match="does not hold initdb"):
            find_postgres_bin()


class TestFailedStarts:
    @pytest.mark.parametrize("make", [
        lambda: RedisServer(binary="/nonexistent/redis-server"),
        lambda: RedisServer(config={"no-such-option": "1"}),
    ])
    def test_a_failed_start_leaves_nothing(self, make):
        """A server that cannot start, started outside a with block, removes the directory it made."""
        server = make()
        with pytest.raises((ServerStartError, OSError)):
            server.start()
        assert not server.directory.exists()

    def test_weed_leaves_no_socket_in_the_temp_directory(self):
        """The gRPC socket files weed makes in /tmp for its ports are gone once the server stops."""
        with SeaweedServer() as server:
            sockets = server.grpc_sockets()
            assert any(path.is_socket() for path in sockets)  # weed made them: the check below means something
        assert not [path for path in sockets if path.exists()]

    def test_weed_keeps_its_logs_in_its_directory(self, seaweed_server):
        """SeaweedFS writes its log files into its own directory, never loose in the temp directory."""
        assert seaweed_server.argv()[1] == f"-logdir={seaweed_server.directory}"
        assert any(path.name.startswith("weed.") for path in seaweed_server.directory.iterdir())


def _retain(*args: str) -> list[str]:
    return [sys.executable, "-c", "from retain.cli import main; main()", *args]


class TestTakenPort:
    def test_retain_server_redis_on_a_taken_port_fails_naming_the_address(self, redis_server):
        """`retain server redis --port N` with N another Redis's: exit 1, one line naming 127.0.0.1:N, and no
        URL printed (the start check once PINGed the other server and claimed success)."""
        done = subprocess.run(_retain("server", "redis", "--port", str(redis_server.port)), capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert done.stdout == ""
        assert done.stderr.strip().splitlines() == [done.stderr.strip()]
        assert f"127.0.0.1:{redis_server.port} is in use by another process" in done.stderr

    def test_postgres_on_a_taken_port_fails_naming_the_address(self, postgres_server):
        """A PostgresServer told to take another postgres's port fails naming the address, not "ready"."""
        server = PostgresServer()
        server.port = postgres_server.port
        with pytest.raises(ServerStartError, match=f"127.0.0.1:{postgres_server.port} is in use"):
            server.start()
        assert not server.directory.exists()

    def test_every_server_waits_for_its_own_listener(self, seaweed_server, valkey_server):
        """Each started server's own child holds its listening port (the answer checked is the child's)."""
        assert seaweed_server._child.listens(seaweed_server.ports["s3"])
        assert valkey_server._child.listens(valkey_server.port)
        assert not valkey_server._child.listens(seaweed_server.ports["s3"])


class TestStopSignals:
    def test_retain_server_redis_child_takes_sigterm(self, tmp_path):
        """The redis-server `retain server redis` starts blocks no signal (it inherited SIGINT and SIGTERM blocked
        from the daemon, ignored the stop and was killed after 10 s); SIGTERM stops both within seconds."""
        process = subprocess.Popen(_retain("server", "redis"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("redis://127.0.0.1:"), process.stderr.read()
            with redis.Redis.from_url(url) as conn:
                child = conn.info("server")["process_id"]
            status = Path(f"/proc/{child}/status").read_text()
            blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
            assert blocked & (1 << (signal.SIGTERM - 1) | 1 << (signal.SIGINT - 1)) == 0, f"mask {blocked:#x}"
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
            assert time.monotonic() - started < 5  # loose: it took the 10 s kill timeout before
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    @pytest.mark.parametrize("make", [RedisServer, PostgresServer], ids=["redis", "postgres"])
    def test_a_server_started_with_the_stop_signals_held_blocks_none(self, make):
        """Started inside a daemon's block of SIGINT and SIGTERM, the server's process blocks neither, and runs as
        the user it would without the block (postgres as nobody under root)."""
        with stop_signals_held():
            server = make().start()
        try:
            status = Path(f"/proc/{server._child.process.pid}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines())
            assert int(fields["SigBlk"], 16) == 0
            expected_uid = 65534 if make is PostgresServer and os.geteuid() == 0 else os.geteuid()
            assert int(fields["Uid"].split()[0]) == expected_uid
        finally:
            server.close()
