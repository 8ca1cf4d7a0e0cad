"""Helpers for tests of anything serving the request language on a stream socket."""

from __future__ import annotations

import socket

from retain.wire.framing import Framer


def exchange(address, data: bytes, answers: int) -> list[bytes]:
    """Send raw bytes to a stream server and return the first ``answers`` documents it sends back, unparsed."""
    framer, found = Framer(1 << 24), []
    with socket.create_connection(address, timeout=60) as raw:
        raw.sendall(data)
        while len(found) < answers:
            chunk = raw.recv(65536)
            assert chunk, "the server closed the connection"
            found.extend(framer.feed(chunk))
    return found[:answers]
