"""retain.servers.SeaweedServer: a real S3 on loopback that enforces create-only puts."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from retain.errors import ServerStartError
from retain.servers import SeaweedServer, find_weed

# The ports weed mini binds when not told otherwise: none may be used.
WEED_DEFAULTS = {8333, 8888, 9333, 9340, 18333, 18888, 19333, 19340, 23646, 33646, 7333, 8181, 9101, 6060}


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                address, port = local.split(":")
                shown = ".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)) if len(address) == 8 else address
                found.add((shown, int(port, 16)))
    return found


def raw_store(server: SeaweedServer) -> S3Store:
    return S3Store(server.bucket, endpoint=server.endpoint, region="us-east-1",
                   access_key_id=server.access_key_id, secret_access_key=server.secret_access_key,
                   client_options={"allow_http": True}, retry_config={"max_retries": 0})


class TestSeaweedServer:
    def test_ports_are_free_loopback_ones(self, seaweed_server):
        """weed listens on exactly the chosen ports (20000-29999, gRPC at +10000), on 127.0.0.1 only."""
        ports = set(seaweed_server.ports.values())
        assert len(ports) == 5 and all(20000 <= port < 30000 for port in ports) and not ports & WEED_DEFAULTS
        chosen = {("127.0.0.1", port) for port in ports} | {("127.0.0.1", port + 10000) for port in ports}
        assert listening_sockets(seaweed_server.pid) == chosen
        assert "-webdav=false" in seaweed_server.argv() and "-master.telemetry=false" in seaweed_server.argv()

    def test_create_only_is_enforced(self, seaweed_server):
        """If-None-Match: * holds: a second create of a name fails and the first bytes stay."""
        store = raw_store(seaweed_server)
        obstore.put(store, "fence/once", b"first", mode="create")
        with pytest.raises(obstore.exceptions.AlreadyExistsError):
            obstore.put(store, "fence/once", b"second", mode="create")
        assert bytes(obstore.get(store, "fence/once").bytes()) == b"first"

    def test_create_only_under_a_race(self, seaweed_server):
        """Six concurrent creates of each of six names: exactly one wins each name.

        (SeaweedFS makes contending creates wait on a lock in one-second steps: few names keep it quick.)
        """
        store = raw_store(seaweed_server)
        winners: list[tuple[int, int]] = []

        def create(name: int, writer: int, barrier: threading.Barrier) -> None:
            barrier.wait()
            try:
                obstore.put(store, f"race/{name}", f"{writer}".encode(), mode="create")
                winners.append((name, writer))
            except obstore.exceptions.AlreadyExistsError:
                pass

        for name in range(6):
            barrier = threading.Barrier(6)
            threads = [threading.Thread(target=create, args=(name, writer, barrier)) for writer in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert sorted(name for name, _ in winners) == list(range(6))
        for name, writer in winners:
            assert bytes(obstore.get(store, f"race/{name}").bytes()) == str(writer).encode()

    def test_unsigned_requests_are_refused(self, seaweed_server):
        """The gateway requires the configured credentials."""
        store = S3Store(seaweed_server.bucket, endpoint=seaweed_server.endpoint, region="us-east-1",
                        skip_signature=True, client_options={"allow_http": True}, retry_config={"max_retries": 0})
        with pytest.raises(obstore.exceptions.BaseError):
            obstore.put(store, "anonymous", b"x")

    def test_missing_binary(self, monkeypatch):
        """RETAIN_WEED names the binary; a missing one fails with a clear error."""
        monkeypatch.setenv("RETAIN_WEED", "/nonexistent/weed")
        assert find_weed() == "/nonexistent/weed"
        with pytest.raises((ServerStartError, FileNotFoundError)):
            SeaweedServer().start()
