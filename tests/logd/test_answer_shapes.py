"""The typed answer shapes (:mod:`retain.logd.answers`) are what a running logd answers, verb by verb, and a
client refuses what is no answer at all.

mypy checks the verbs against the shapes; these tests check the shapes against the wire, so that a field a verb
adds or drops without its ``TypedDict`` fails here rather than in a client that trusted the type.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import get_type_hints

import pytest

from retain.errors import StorageError
from retain.logd import answers
from retain.logd.client import Client
from retain.wire.framing import END


def keys_of(shape: type) -> tuple[frozenset[str], frozenset[str]]:
    return shape.__required_keys__, shape.__optional_keys__  # type: ignore[attr-defined]


def assert_shaped(result: dict, shape: type) -> None:
    """``result`` has every key ``shape`` requires, no key it does not name, and an int wherever it says int."""
    required, optional = keys_of(shape)
    assert required <= set(result) <= required | optional, (shape.__name__, sorted(result))
    for name, hint in get_type_hints(shape).items():
        if hint is int and name in result:
            assert type(result[name]) is int, (shape.__name__, name, result[name])


@pytest.fixture
def client(served) -> Iterator[Client]:
    with Client(served.address, author="shapes") as connected:
        yield connected


def test_every_verb_answers_its_shape(client):
    """session, schema (read and set), patch, get, list, scopes, compact, retain and watch, each against its
    ``TypedDict``; a retain rule's counts against :class:`~retain.logd.answers.RuleResultDocument`."""
    assert_shaped(client.call("session", author="shapes"), answers.SessionResult)
    assert_shaped(client.call("patch", ops=[{"set": "jobs.j1", "value": {"status": "done",
                                                                          "updatedAt": "2026-01-01T00:00:00Z"}}]),
                  answers.CommitResult)
    assert_shaped(client.call("schema"), answers.SchemaResult)
    assert_shaped(client.call("get", path="jobs.j1"), answers.GetResult)
    assert_shaped(client.call("list", path="jobs.*"), answers.ListResult)
    assert_shaped(client.call("scopes"), answers.ScopesResult)
    assert_shaped(client.call("compact"), answers.CompactResult)
    retained = client.call("retain", now="2026-09-12T08:00:00Z", what=[
        {"path": "jobs.*", "age": ".updatedAt", "after": "1d"}])
    assert_shaped(retained, answers.RetainPassResult)
    assert retained["deleted"] == 1
    for rule in retained["rules"]:
        assert_shaped(rule, answers.RuleResultDocument)
    assert_shaped(client.call("watch", path="jobs"), answers.WatchResult)
    assert client.watch("jobs") == {"path": "jobs", "from": retained["commit"] + 1, "commit": retained["commit"]}


def test_a_delta_has_its_shape(served, client):
    """What a watch pushes is a :class:`~retain.logd.answers.DeltaBody`."""
    client.watch("jobs")
    with Client(served.address, author="writer") as writer:
        writer.patch([{"set": "jobs.j2", "value": {"status": "running"}}])
    assert_shaped(client.next_delta(), answers.DeltaBody)


@pytest.fixture
def not_logd() -> Iterator[tuple[str, int]]:
    """A TCP server that answers every document with ``{error: boom}``: framed right, but no answer."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        connection, _ = listener.accept()
        with connection:
            while (data := connection.recv(65536)) and END not in data:
                pass
            connection.sendall(b'{"error": "boom"}\n' + END)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield listener.getsockname()
    listener.close()
    thread.join(timeout=10)


def test_what_is_no_answer_is_refused_by_the_client(not_logd):
    """A client reading a document that is neither a result nor an error says so, naming what came."""
    with Client(not_logd) as client, pytest.raises(StorageError, match=r"no answer: .*\(got \['error'\]\)"):
        client.get("jobs")
