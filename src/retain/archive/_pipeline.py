"""What keeps a fold fast: the cyclic GC paused, the next XRANGE asked for early, encoding on a worker.

Profiled on a 1M-entry fold, a sixth of the time was Python's cyclic GC, set
off by the reply lists hiredis builds (none of which is a cycle); a fifth was
waiting on Redis; a quarter was Arrow compute and Parquet/zstd, which release
the GIL. So a fold:

- pauses the GC while it runs (:func:`paused_gc`; reference counting still
  frees every chunk as it goes, and nested or concurrent folds share one pause);
- reads with :class:`Chunks`: as soon as a chunk arrives, the XRANGE after it
  is sent on a worker thread, so Redis works on the next chunk while this one
  is converted;
- hands each row group to an encoder thread
  (:class:`~retain.archive.files.FileWriter` with ``encoder``), so the columns,
  zstd and the page checksums are computed beside the reading.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import Any

import redis

from retain._redis import translate_errors
from retain.ids import StreamId

__all__ = ["Chunks", "paused_gc", "raw_reader"]

_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic GC off inside the block (if it was on), back on when the last such block ends."""
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


def _as_sent(response: Any, **options: Any) -> Any:
    return response


def raw_reader(conn: Any) -> Any:
    """The client a fold (and an Arrow read) takes XRANGE chunks from.

    redis-py turns each entry's flat ``[name, value, ...]`` list into a dict,
    which a fold would only flatten again: a quarter of its time. A private
    client on the same connection pool, with XRANGE replies left as the server
    sent them, skips both. Other clients (a cluster) are used as they are.
    """
    if not isinstance(conn, redis.Redis):
        return conn
    reader = redis.Redis(connection_pool=conn.connection_pool)
    reader.set_response_callback("XRANGE", _as_sent)
    return reader


class Chunks:
    """The XRANGE chunks of ``low..high`` up to ``limit`` entries, each next one fetched while the last is used.

    Iterating yields the chunks in order; :attr:`exhausted` then says whether
    the range held nothing more (a short chunk, or the end reached) rather than
    the limit stopping it. Without ``prefetch`` every chunk is read when asked.
    :meth:`close` waits for a read in flight (a caller that stops early must
    call it, or use the object as a context manager).
    """

    def __init__(self, conn: Any, key: str, low: StreamId, high: StreamId, *, count: int, limit: int,
                 prefetch: Executor | None = None) -> None:
        self.conn, self.key, self.high = conn, key, high
        self.count, self.limit, self.prefetch = count, limit, prefetch
        self.low = low
        self.read = 0
        self.exhausted = False
        #: the read asked for and not yet taken: how many entries it asked for, and its answer to come
        self._asked: tuple[int, Future[list[Any]] | None] | None = None

    def _xrange(self, low: StreamId, count: int) -> list[Any]:
        with translate_errors(self.key):
            return self.conn.xrange(self.key, str(low), str(self.high), count=count)  # type: ignore[no-any-return]

    def _ask(self, *, ahead: bool = True) -> None:
        """Ask for the next chunk: sent at once on the worker when there is one (and ``ahead``), else when taken."""
        asked = min(self.count, self.limit - self.read)
        future = self.prefetch.submit(self._xrange, self.low, asked) if ahead and self.prefetch is not None else None
        self._asked = (asked, future)

    def __iter__(self) -> Iterator[list[Any]]:
        try:
            if self.read < self.limit:
                self._ask(ahead=False)  # the first is read at once: a range of one short chunk starts no thread
            while self._asked is not None:
                asked, ahead = self._asked
                self._asked = None
                chunk = ahead.result() if ahead is not None else self._xrange(self.low, asked)
                self.read += len(chunk)
                last = StreamId.parse(chunk[-1][0]) if chunk else None
                if last is None or len(chunk) < asked or last >= self.high:
                    self.exhausted = True
                else:
                    self.low = last.successor()
                    if self.read < self.limit:
                        self._ask()  # Redis reads the next chunk while the caller takes this one
                if chunk:
                    yield chunk
        finally:
            self.close()

    def close(self) -> None:
        """Wait for a read in flight, dropping its answer."""
        asked, self._asked = self._asked, None
        if asked is not None and asked[1] is not None:
            asked[1].exception()

    def __enter__(self) -> Chunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
