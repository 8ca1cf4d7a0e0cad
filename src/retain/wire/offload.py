"""Loading and dumping documents off the event loop once they pass a small size, on a small pool.

One loop serves every connection of a server, so a document loaded or dumped on it stalls them all
(a 3 MiB JSON list held every other client 9 s; the 1.6 MB answer to a 21-byte
``get`` held them 6-8 s). A request longer than :attr:`~retain.wire.bounds.WireLimits.inline_bytes` is
loaded, and an answer weighing more is dumped, on one of :data:`WORKERS` threads shared by the
process: the loop only moves bytes, and a big document costs its own client the wait. Small ones
(nearly all) stay on the loop, where a thread hop would cost more than the work.

:func:`load_request` also weighs what it loaded (:func:`~retain.wire.bounds.loaded_size`), so the
connection can count a request at its loaded size against its budgets.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from retain.wire.bounds import TooLarge, WireLimits, loaded_size
from retain.wire.documents import Format, dump, receive

__all__ = ["WORKERS", "Loaded", "dump_answer", "load_request", "weighs_more"]

#: threads loading and dumping big documents, for the whole process: a bound, so that many big documents at
#: once queue for them rather than take every core from the loop
WORKERS = 2
R = TypeVar("R")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Loaded:
    """A request loaded: its value, its format, and the bytes its objects take."""

    value: Any
    fmt: Format
    size: int


def _load(document: bytes | TooLarge, limits: WireLimits) -> Loaded:
    """Load a received document and weigh it (on whatever thread calls it).

    Raises:
        InvalidDocument: as :func:`~retain.wire.documents.receive`.
    """
    value, fmt = receive(document, limits)
    return Loaded(value, fmt, loaded_size(value))


async def load_request(document: bytes | TooLarge, limits: WireLimits) -> Loaded:
    """Load a received document and weigh it, on the pool when it is longer than ``limits.inline_bytes``.

    Raises:
        InvalidDocument: as :func:`~retain.wire.documents.receive`.
    """
    if isinstance(document, TooLarge) or len(document) <= limits.inline_bytes:
        return _load(document, limits)
    return await _run(_load, document, limits)


async def dump_answer(document: Mapping[str, object], fmt: Format, limits: WireLimits) -> bytes:
    """:func:`~retain.wire.documents.dump`, on the pool when the answer weighs more than ``limits.inline_bytes``."""
    if not weighs_more(document, limits.inline_bytes):
        return dump(document, fmt)
    return await _run(dump, document, fmt)


def weighs_more(value: object, size: int) -> bool:
    """Whether ``value``'s objects take more than ``size`` bytes; stops as soon as they do, so a small answer
    costs a few microseconds and a big one no more than ``size`` bytes' worth of walking."""
    todo = [value]
    while todo:
        item = todo.pop()
        size -= sys.getsizeof(item)
        if size < 0:
            return True
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return False


async def _run(function: Callable[..., R], *args: Any) -> R:
    return await asyncio.get_running_loop().run_in_executor(_executor(), function, *args)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="wire-documents")
        return _pool
