"""One beat's commands in one round trip, and their answers read back in one pass (the driver's hot path).

A standalone ``redis.Redis`` gets :func:`send_direct`: one write of the packed
commands on a pooled connection, the replies parsed by hiredis straight off the
socket (:func:`read_replies`). A cluster gets one pipeline per node, all sent
at once, a node's outage failing its own commands only (:func:`send_pipeline`,
:mod:`retain._nodes`); any other client redis-py's pipeline.
While a beat reads its answers the cyclic garbage collector is paused
(:func:`retain._gc.paused_gc`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.exceptions

from retain._nodes import send_all
from retain._redis import RedisLike

hiredis: Any
try:  # redis[hiredis]: the beat's replies are parsed in one pass (see read_replies)
    import hiredis
except ImportError:  # pragma: no cover - redis-py's own parser then reads them one by one
    hiredis = None

__all__ = ["READ_CHUNK", "pipeline_options", "read_replies", "send_direct", "send_pipeline"]


def send_pipeline(conn: RedisLike, commands: Sequence[tuple[str, ...]], *,
                  node_timeout: float | None = None) -> list[Any]:
    """Through redis-py's pipeline; on a cluster one per node, sent at once, a node that fails or has not
    answered within ``node_timeout`` seconds failing its own commands only (:func:`retain._nodes.send_by_node`)."""
    return send_all(conn, commands, timeout=node_timeout, options=pipeline_options)


#: bytes read from the socket at a time by the one-pass reader
READ_CHUNK = 1 << 20


_buffers = threading.local()


def _buffer() -> bytearray:
    """This thread's receive buffer: made once (a fresh 1 MiB a round trip was zeroed each time)."""
    buffer: bytearray | None = getattr(_buffers, "buffer", None)
    if buffer is None:
        buffer = _buffers.buffer = bytearray(READ_CHUNK)
    return buffer


def read_replies(sock: Any, count: int) -> list[Any]:
    """``count`` replies read straight off the socket and parsed by hiredis in one pass.

    What redis-py's ``read_response`` does per reply (health checks, its own
    buffering, a Python frame or three per answer) is most of a large beat's
    client time; here a reply costs one ``gets``. An error reply comes back as a
    ``ResponseError`` value, as a pipeline gives it. A connection that fails
    half-way raises ``ConnectionError`` (the caller drops the connection).
    """
    assert hiredis is not None
    reader = hiredis.Reader(protocolError=redis.exceptions.InvalidResponse,
                            replyError=redis.exceptions.ResponseError)
    buffer = _buffer()
    answers: list[Any] = []
    append, gets = answers.append, reader.gets
    while len(answers) < count:
        size = sock.recv_into(buffer)
        if not size:
            raise redis.exceptions.ConnectionError("the server closed the connection in the middle of a beat")
        reader.feed(buffer, 0, size)
        while (reply := gets()) is not False:
            append(reply)
    return answers


def pipeline_options(command: tuple[str, ...]) -> dict[str, Any]:
    """What redis-py's pipeline needs to parse an answer: the range form of XPENDING is told apart by an option."""
    return {"parse_detail": True} if command[0] == "XPENDING" and len(command) > 3 else {}


def send_direct(conn: redis.Redis, count: int, pack: Callable[[Any], bytes]) -> list[Any]:
    """One write of ``count`` commands, then one read per command, on a pooled connection of a standalone client.

    What ``Pipeline.execute`` does, less its per-command bookkeeping: the beat is
    the driver's hot path. ``pack(connection)`` gives the commands' wire form
    (redis-py's own packer); redis-py's connection parses the answers.
    An answer lost to a dropped connection is that stream's failure; the answers
    already read stand.
    """
    pool = conn.connection_pool
    connection: Any = pool.get_connection()
    answers: list[Any] = []
    try:
        connection.send_packed_command([pack(connection)])
        sock = getattr(connection, "_sock", None)
        if hiredis is not None and sock is not None and not connection.encoder.decode_responses:
            answers = read_replies(sock, count)
        else:
            for _ in range(count):
                try:
                    answers.append(connection.read_response())
                except redis.exceptions.ResponseError as exc:
                    answers.append(exc)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        # The socket may hold unread answers: never hand it back as it is.
        connection.disconnect()
        answers += [exc] * (count - len(answers))
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    return answers
