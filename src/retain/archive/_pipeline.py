"""What keeps a fold fast: the cyclic GC paused, the next XRANGE asked for early, encoding on a worker.

Profiled on a 1M-entry fold, a sixth of the time was Python's cyclic GC, set
off by the reply lists hiredis builds (none of which is a cycle); a fifth was
waiting on Redis; a quarter was Arrow compute and Parquet/zstd, which release
the GIL. So a fold:

- pauses the GC while it runs (:func:`paused_gc`; reference counting still
  frees every chunk as it goes, and nested or concurrent folds share one pause);
- reads with :class:`Chunks`: as soon as a chunk arrives, the XRANGE after it
  is written to the connection, so Redis finds and sends the next chunk while
  this one is converted (pipelined on the wire: a thread for it measured
  slower, its reads and the conversion taking turns on the GIL);
- hands each row group to an encoder thread
  (:class:`~retain.archive.files.FileWriter` with ``encoder``), so the columns,
  zstd and the page checksums are computed beside the reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar, cast

import redis

from retain._gc import paused_gc
from retain._redis import RedisLike, translate_errors
from retain.archive.files import FileWriter
from retain.ids import StreamId

T = TypeVar("T")

__all__ = ["PUT_THREADS", "Chunks", "LazyExecutor", "Workers", "raw_reader", "read_file"]

#: data files a beat stores at once (retain.archive.beat)
PUT_THREADS = 8

def _as_sent(response: Any, **options: Any) -> Any:
    return response


def raw_reader(conn: RedisLike) -> Any:
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
    """The XRANGE chunks of ``low..high`` up to ``limit`` entries, each next one asked for while the last is used.

    Iterating yields the chunks in order; :attr:`exhausted` then says whether
    the range held nothing more (a short chunk, or the end reached) rather than
    the limit stopping it. With ``prefetch`` (and a ``redis.Redis``, which can
    lend a connection of its own), as soon as a full chunk arrives the XRANGE
    after it is written to the connection, and its answer read only when the
    next chunk is taken: Redis finds and sends it while this one is converted,
    with no thread and no wait for the GIL. Otherwise every chunk is read when
    asked. :meth:`close` reads and drops an answer still on the wire and gives
    the connection back (a caller that stops early must call it, or use the
    object as a context manager).
    """

    def __init__(self, conn: RedisLike, key: str, low: StreamId, high: StreamId, *, count: int, limit: int,
                 prefetch: bool = False) -> None:
        self.conn, self.key, self.high = conn, key, high
        self.count, self.limit = count, limit
        self.prefetch = prefetch and isinstance(conn, redis.Redis)
        self.low = low
        self.read = 0
        self.exhausted = False
        #: the read asked for and not yet taken: how many entries it asked for, and whether it is on the wire
        self._asked: tuple[int, bool] | None = None
        self._connection: Any = None

    def _xrange(self, low: StreamId, count: int) -> list[Any]:
        with translate_errors(self.key):
            return self.conn.xrange(self.key, str(low), str(self.high), count=count)  # type: ignore[no-any-return]

    def _ask(self, *, ahead: bool) -> None:
        """Ask for the next chunk: written to the wire at once when ``ahead`` (and possible), else when taken."""
        asked = min(self.count, self.limit - self.read)
        sent = ahead and self.prefetch
        if sent:
            with self._wire():
                if self._connection is None:
                    self._connection = self._pool().get_connection()
                self._connection.send_command("XRANGE", self.key, str(self.low), str(self.high), "COUNT", asked)
        self._asked = (asked, sent)

    def _take(self) -> list[Any]:
        assert self._asked is not None
        asked, sent = self._asked
        self._asked = None
        if not sent:
            return self._xrange(self.low, asked)
        with self._wire():
            return self._connection.read_response()  # type: ignore[no-any-return]

    @contextmanager
    def _wire(self) -> Iterator[None]:
        """Redis errors as retain's; a connection that failed is dropped, never given back to the pool half-read."""
        try:
            with translate_errors(self.key):
                yield
        except BaseException as exc:
            if self._connection is not None and not isinstance(exc.__cause__, redis.exceptions.ResponseError):
                self._connection.disconnect()
                self._release()
            raise

    def __iter__(self) -> Iterator[list[Any]]:
        try:
            if self.read < self.limit:
                self._ask(ahead=False)  # the first at once: a range of one short chunk asks no more
            while self._asked is not None:
                asked = self._asked[0]
                chunk = self._take()
                self.read += len(chunk)
                last = StreamId.parse(chunk[-1][0]) if chunk else None
                if last is None or len(chunk) < asked or last >= self.high:
                    self.exhausted = True
                else:
                    self.low = last.successor()
                    if self.read < self.limit:
                        self._ask(ahead=True)  # Redis finds the next chunk while the caller takes this one
                if chunk:
                    yield chunk
        finally:
            self.close()

    def close(self) -> None:
        """Read and drop an answer still on the wire; give the connection back."""
        asked, self._asked = self._asked, None
        if asked is not None and asked[1] and self._connection is not None:
            try:
                self._connection.read_response()
            except Exception:  # noqa: BLE001 - an answer nobody wants: the connection is dropped instead
                self._connection.disconnect()
        self._release()

    def _pool(self) -> Any:
        # prefetch is on for a redis.Redis alone (checked when made): its one connection pool
        return cast(redis.Redis, self.conn).connection_pool

    def _release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool().release(connection)

    def __enter__(self) -> Chunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LazyExecutor(Executor):
    """An executor of ``threads`` threads (one by default) that start with its first task."""

    def __init__(self, name: str, threads: int = 1) -> None:
        self.name, self.threads = name, threads
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait, cancel_futures=cancel_futures)


class Workers:
    """How a fold runs: the GC paused, the next XRANGE asked for ahead, row groups encoded on a thread of
    their own, data files stored a few at a time (a beat's many small ones). Each pool starts with its first
    task: a small fold (one row group, one file) starts none. Entered on ``stack``, which ends them."""

    prefetch = True

    def __init__(self, stack: ExitStack) -> None:
        stack.enter_context(paused_gc())
        self.encoder: Executor = stack.enter_context(LazyExecutor("retain-fold-encode"))
        self.putter: Executor = stack.enter_context(LazyExecutor("retain-fold-put", PUT_THREADS))


def read_file(conn: RedisLike, key: str, low: StreamId, boundary: StreamId, *, count: int, limit: int,
              workers: Workers, table_format: int, tell: Callable[[int], None] | None = None) -> tuple[FileWriter, bool]:
    """Read up to ``limit`` entries of ``low..boundary`` into a file of a ``table_format`` table; also say
    whether the range is exhausted."""
    writer = FileWriter(key, encoder=workers.encoder, table_format=table_format)
    chunks = Chunks(conn, key, low, boundary, count=count, limit=limit, prefetch=workers.prefetch)
    try:
        for chunk in chunks:
            writer.add(chunk)
            if tell is not None:
                tell(writer.count)
    except BaseException:
        chunks.close()  # an answer asked for ahead is read off the connection before it goes back to the pool
        writer.abandon()
        raise
    return writer, chunks.exhausted
