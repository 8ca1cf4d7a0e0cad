"""The Unix socket is safe to serve on: mode 0600 whatever the umask, never replacing a
file that is not a socket, never taking over a live server's socket, replacing a stale one."""

from __future__ import annotations

import os
import socket
import stat
import threading

import pytest

from retain.errors import InvalidInput
from retain.logd import Client, ServerThread
from tests.helpers.waiting import wait_for


class TestSocketFile:
    def test_the_socket_is_0600_even_under_umask_000(self, store, tmp_path):
        """Under umask 000 the socket was 0777 (any local user could patch); now it is made 0600."""
        path = str(tmp_path / "logd.sock")
        old = os.umask(0)
        try:
            with ServerThread(store, socket_path=path):
                assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        finally:
            os.umask(old)

    def test_socket_mode_is_configurable(self, store, tmp_path):
        """socket_mode sets the mode (a group that shares the socket: 0660)."""
        path = str(tmp_path / "logd.sock")
        with ServerThread(store, socket_path=path, socket_mode=0o660):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o660

    def test_a_regular_file_is_never_replaced(self, store, tmp_path):
        """A file that is not a socket at the path is refused, named, and left as it was."""
        path = tmp_path / "precious.txt"
        path.write_text("keep me")
        with pytest.raises(InvalidInput, match="exists and is not a socket"):
            ServerThread(store, socket_path=str(path)).start()
        assert path.read_text() == "keep me"

    def test_a_server_that_cannot_start_leaves_nothing_running(self, store, tmp_path):
        """A start that fails after the TCP listener bound (and, on PostgreSQL, the commit follower started)
        closes them again: the port is free, no thread of the failed server is left."""
        path = tmp_path / "precious.txt"
        path.write_text("keep me")
        before = set(threading.enumerate())
        server = ServerThread(store, listen=("127.0.0.1", 0), socket_path=str(path))
        with pytest.raises(InvalidInput, match="exists and is not a socket"):
            server.start()
        wait_for(lambda: set(threading.enumerate()) <= before, "the failed server's threads to end")
        with socket.socket() as probe:  # the listener it bound is closed: its port can be bound again
            probe.bind(server.server._stream._sockets.address)

    def test_a_live_server_is_not_taken_over(self, store, open_store, tmp_path):
        """A second server on the socket of a live one refuses to start; the first keeps answering."""
        path = str(tmp_path / "logd.sock")
        with ServerThread(store, socket_path=path):
            with pytest.raises(InvalidInput, match="a server is answering on"):
                ServerThread(open_store("other.sqlite3"), socket_path=path).start()
            with Client(path) as client:
                client.patch([{"set": "jobs.j1", "value": 1}])
        assert store.head == 1

    def test_a_stale_socket_is_replaced(self, store, tmp_path):
        """A socket file nobody answers on (a server that died) is replaced; the server then answers there."""
        path = str(tmp_path / "logd.sock")
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(path)
        dead.close()  # the file stays, nobody listens
        with ServerThread(store, socket_path=path), Client(path) as client:
            client.patch([{"set": "jobs.j1", "value": 1}])
        assert not os.path.exists(path), "the server removes its own socket on close"

    def test_a_bad_mode_is_refused(self, store, tmp_path):
        """A mode outside 0-0777 is refused, naming it, before anything is made."""
        with pytest.raises(InvalidInput, match="permission mode"):
            ServerThread(store, socket_path=str(tmp_path / "s.sock"), socket_mode=0o7777).start()
        assert not os.listdir(tmp_path).count("s.sock")
