"""One round trip on a Redis Cluster as one pipeline per node, so that one node's outage fails its own commands only.

redis-py's cluster pipeline answers a node that is down or frozen by retrying
the whole pipeline and re-reading the cluster's layout: measured on a 3-master
cluster with one master SIGSTOPped, one pipeline took 45 s, and the ones after
it raised for every command, the healthy masters' answers lost. A retention
beat cannot wait that long (every stream would go untrimmed), nor lose the
other masters' answers (a node's outage must cost only its own streams).

:func:`send_by_node` groups the commands by the node serving each one's key
(redis-py's own slot map), sends each node's pipeline on a thread of its own,
and waits for them at most ``timeout`` seconds: a node that has not answered
by then, or whose connection failed, fails its commands with
:class:`~retain.errors.ServerUnavailable`; the other nodes' answers stand. A
node whose earlier pipeline did not answer in time gets no other until that one
ends (one thread waits on a frozen node, not one per beat; the client's
``socket_timeout`` ends it). Pipelines from several threads go to a healthy
node side by side. A
``MOVED`` answer (the slots moved) fails its command this round trip and has
the client read the cluster's layout again for the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import redis.cluster
import redis.exceptions

from retain._redis import REDIS_ERRORS, RedisLike
from retain.errors import ServerUnavailable

__all__ = ["command_key", "send_all", "send_by_node"]

#: commands whose key is their third word (a subcommand comes second)
_KEY_THIRD = frozenset({"XINFO", "MEMORY", "OBJECT"})
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
#: (client, node name) -> a pipeline that did not answer in time: until it ends, the node gets no other
_stuck: dict[tuple[int, str], Future[list[Any]]] = {}


def command_key(command: Sequence[str]) -> str | None:
    """The key a command addresses (what routes it on a cluster); None for one without a key (TIME)."""
    position = 2 if command[0].upper() in _KEY_THIRD else 1
    return command[position] if len(command) > position else None


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(32, thread_name_prefix="retain-node")
        return _pool


def _no_options(command: tuple[str, ...]) -> dict[str, Any]:
    return {}


def send_by_node(conn: Any, commands: Sequence[tuple[str, ...]], *, timeout: float | None = None,
                 options: Callable[[tuple[str, ...]], dict[str, Any]] = _no_options) -> list[Any]:
    """Each command's answer, or the exception it met, for a ``redis.cluster.RedisCluster`` (``Any``: redis-py
    leaves the calls made of it here untyped): one pipeline per
    node, all at once; a node that fails or has not answered within ``timeout`` seconds fails its own commands
    only (see the module docstring). ``options(command)`` gives what redis-py's parser needs for an answer.
    """
    groups: dict[str, tuple[Any, list[int]]] = {}
    for index, command in enumerate(commands):
        key = command_key(command)
        node = conn.get_node_from_key(key) if key is not None else conn.get_default_node()
        groups.setdefault(node.name, (node, []))[1].append(index)
    answers: list[Any] = [None] * len(commands)
    futures: dict[Future[list[Any]], list[int]] = {}
    names: dict[Future[list[Any]], str] = {}
    for name, (node, indexes) in groups.items():
        stuck = _stuck.get((id(conn), name))
        if stuck is not None and not stuck.done():
            # A pipeline to it is stuck past its time: one thread waits on a frozen node, never a pile of them.
            for index in indexes:
                answers[index] = ServerUnavailable(f"the cluster node {name} has not answered an earlier round "
                                                   "trip yet")
            continue
        client = conn.get_redis_connection(node)
        future = _executor().submit(_pipeline, client, [commands[index] for index in indexes], options)
        futures[future] = indexes
        names[future] = name
    done, late = wait(futures, timeout=timeout)
    for future in late:
        _stuck[(id(conn), names[future])] = future
    moved = False
    for future, indexes in futures.items():
        if future in late:
            error: BaseException = ServerUnavailable(f"the cluster node serving {len(indexes)} of this round trip's "
                                                     f"commands did not answer within {timeout:g} s")
            node_answers: list[Any] = [error] * len(indexes)
        else:
            try:
                node_answers = future.result()
            except REDIS_ERRORS as exc:
                node_answers = [exc] * len(indexes)
        for index, answer in zip(indexes, node_answers, strict=True):
            answers[index] = answer
            moved = moved or (isinstance(answer, redis.exceptions.ResponseError)
                              and str(answer).startswith(("MOVED", "ASK")))
    if moved:
        _refresh(conn)
    return answers


def send_all(conn: RedisLike, commands: Sequence[tuple[str, ...]], *, timeout: float | None = None,
             options: Callable[[tuple[str, ...]], dict[str, Any]] = _no_options) -> list[Any]:
    """Each command's answer, or the exception it met, in one round trip: a pipeline, or on a cluster one per
    node (:func:`send_by_node`, with ``timeout``). redis-py errors that fail the whole pipeline are raised."""
    if isinstance(conn, redis.cluster.RedisCluster):
        return send_by_node(conn, commands, timeout=timeout, options=options)
    return _pipeline(conn, commands, options)


def _pipeline(client: RedisLike, commands: Sequence[tuple[str, ...]],
              options: Callable[[tuple[str, ...]], dict[str, Any]]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    try:
        for command in commands:
            pipe.execute_command(*command, **options(command))
        answers: list[Any] = pipe.execute(raise_on_error=False)
        return answers
    finally:
        pipe.reset()


def _refresh(conn: Any) -> None:
    """Read the cluster's layout again (slots moved); a failure here waits for the next round trip."""
    try:
        conn.nodes_manager.initialize()
    except REDIS_ERRORS:
        pass
