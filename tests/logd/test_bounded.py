"""Bounded work, the overflow of now included: each request's cost is bounded before it
runs, a patch costs time linear in its ops, the loader reads YAML 1.2 core scalars, a hostile integer is an
answered error and the connection goes on."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retain.logd.draft as draft_module
from retain.errors import InvalidSettings, LimitExceeded
from retain.logd.settings import Settings
from retain.logd.verbs import Context, handle
from retain.wire import load
from retain.wire.bounds import WireLimits
from retain.wire.framing import Framer

HUGE_AT = b'{"get":{"path":"a","at":' + b"9" * 5000 + b"}}"


def documents(address, data: bytes, count: int) -> list[dict]:
    """Send raw bytes on a stream socket (TCP or Unix) and read ``count`` answers, loaded."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    framer, found = Framer(1 << 24), []
    with socket.socket(family, socket.SOCK_STREAM) as raw:
        raw.settimeout(60)
        raw.connect(address)
        raw.sendall(data)
        while len(found) < count:
            chunk = raw.recv(65536)
            assert chunk, "the server closed the connection"
            found.extend(framer.feed(chunk))
    return [load(document)[0] for document in found[:count]]


class TestPatchIsLinear:
    def test_sets_of_one_maps_fields_encode_it_once(self, store, monkeypatch):
        """3,000 sets of one map's fields used to decode and re-encode the whole map per op (quadratic: 6 s,
        8,000 ops 245 s); now the map is encoded a bounded number of times, however many ops."""
        store.session().patch([{"set": "jobs.a", "value": {"status": "new"}}, {"set": "list", "value": [0]}])
        encoded: list[int] = []
        real = draft_module.dumps
        monkeypatch.setattr(draft_module, "dumps", lambda value: encoded.append(len(value)) or real(value))
        store.session().patch([{"set": f"jobs.a.f{i}", "value": i} for i in range(3000)]
                              + [{"append": "list", "value": i} for i in range(3000)])
        assert len(encoded) <= 4, f"{len(encoded)} encodes for 6,000 ops"
        value = store.session().get("jobs.a").value
        assert len(value) == 3001 and value["f2999"] == 2999
        assert store.session().get("list").value == list(range(1)) + list(range(3000))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.one_of(
        st.tuples(st.just("set"), st.sampled_from(["m.a", "m.b", "m.c", "m.n.x", "m.n"]), st.integers(0, 9)),
        st.tuples(st.just("delete"), st.sampled_from(["m.a", "m.b", "m.n.x", "m.n"]), st.none()),
        st.tuples(st.just("append"), st.just("m.l"), st.integers(0, 9))), max_size=25))
    def test_one_patch_reads_as_its_ops_one_by_one(self, open_store, ops):
        """A patch of many ops leaves the tree the same ops leave applied one patch each (those that apply)."""
        whole, single = open_store("whole.sqlite3"), open_store("single.sqlite3")
        seed = [{"set": "m", "value": {"a": 1, "l": [], "n": {"x": 1}}}]
        wire = [{verb: path} if value is None else {verb: path, "value": value} for verb, path, value in ops]
        for target in (whole, single):
            target.session().patch(seed)
        applied = []
        for op in wire:
            try:
                single.session().patch([op])
                applied.append(op)
            except Exception:
                pass
        if applied:
            whole.session().patch(applied)
        assert whole.session().get("m").value == single.session().get("m").value


class TestLimits:
    def test_too_many_ops_is_refused_naming_the_limit(self, open_store):
        """A patch past limits.patchOps is refused before it runs; nothing is written."""
        store = open_store(max_patch_ops=10)
        with pytest.raises(LimitExceeded, match="11 ops in a patch; the limit limits.patchOps is 10"):
            handle(Context(store, store.session()), {"patch": {"ops": [{"set": f"a{i}", "value": 1}
                                                                      for i in range(11)]}})
        assert store.head == 0

    def test_too_many_rules_is_refused(self, open_store):
        """A retain of 10k rules (0.5 MB) ran 327 s; past limits.retainRules it is refused before any rule runs."""
        store = open_store()
        rules = [{"path": "jobs.*", "age": ".t", "after": "1d"}] * 10_000
        with pytest.raises(LimitExceeded, match="10000 rules in a retain; the limit limits.retainRules is 1000"):
            handle(Context(store, store.session()), {"retain": {"what": rules}})

    def test_a_long_path_is_refused(self, open_store):
        """A path longer than limits.pathLength is refused, wherever it stands (get, op, precondition, rule)."""
        store = open_store(max_path_length=32)
        context = Context(store, store.session())
        long = "a." * 20 + "b"
        for request in ({"get": {"path": long}}, {"patch": {"ops": [{"delete": long}]}},
                        {"patch": {"ops": [], "if": {long: 1}}},
                        {"retain": {"what": [{"path": long + ".*", "age": ".t", "after": "1d"}]}}):
            with pytest.raises(LimitExceeded, match="the limit limits.pathLength is 32"):
                handle(context, request)

    def test_limits_are_whole_positive_numbers(self):
        """A limit of 0 or a string is refused, naming it."""
        with pytest.raises(InvalidSettings, match="limits.patchOps"):
            Settings(max_patch_ops=0)


class TestHostileNumbers:
    @pytest.mark.parametrize("transport", ["tcp", "unix"])
    def test_5000_digits_are_answered_and_the_connection_goes_on(self, served, transport):
        """{get: {at: <5000 digits>}} is answered limit_exceeded, and the get behind it on the same connection is
        answered too (it used to wedge the connection)."""
        served.server.store.session().patch([{"set": "a", "value": 1}])
        address = served.address if transport == "tcp" else served.socket_path
        refused, answered = documents(address, HUGE_AT + b"\n...\n" + b'{"get":{"path":"a"}}\n...\n', 2)
        assert refused["error"]["code"] == "limit_exceeded" and "max_int_digits" in refused["error"]["message"]
        assert answered == {"result": {"get": {"commit": 1, "value": 1}}}

    def test_http_answers_the_wire_error(self, served):
        """Over HTTP the same document is the wire's JSON error (413 limit_exceeded), not a plain 500."""
        answer = httpx.post(served.http_url, content=HUGE_AT, headers={"content-type": "application/json"})
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "limit_exceeded"

    def test_yaml_integers_are_capped_before_conversion(self):
        """A YAML integer past max_int_digits is refused naming the limit; hex too."""
        with pytest.raises(LimitExceeded, match="max_int_digits is 64"):
            load("{a: " + "7" * 5000 + "}")
        with pytest.raises(LimitExceeded, match="max_int_digits"):
            load("{a: 0x" + "f" * 100 + "}")
        assert load("{a: " + "7" * 64 + "}")[0] == {"a": int("7" * 64)}

    def test_a_sexagesimal_integer_is_a_string(self, served):
        """YAML 1.1 read 1:1:1:... (234 KiB) as a base-60 integer, quadratically (13.9 s of logd); YAML 1.2 core
        reads it as the string it is, stored as written."""
        sexagesimal = ":".join(["1"] * 120_000)
        assert load("{a: " + sexagesimal + "}", WireLimits())[0] == {"a": sexagesimal}
        raw = documents(served.address, b"{patch: {ops: [{set: t, value: " + sexagesimal.encode() + b"}]}}\n...\n"
                        b"{get: {path: t}}\n...\n", 2)
        assert raw[1]["result"]["get"]["value"] == sexagesimal

    def test_json_infinity_by_exponent_is_refused(self):
        """1e999 is infinity; JSON numbers are finite."""
        with pytest.raises(Exception, match="numbers are finite"):
            load('{"a": 1e999}')


class TestNowOverflow:
    @pytest.mark.parametrize("request_", [{"compact": {"now": "0001-01-01T00:00:00+23:59"}},
                                          {"retain": {"now": "0001-01-01T00:00:00+23:59",
                                                      "what": [{"path": "jobs.*", "age": ".t", "after": "1d"}]}}])
    def test_a_now_before_year_1_in_utc_is_a_bad_request(self, served, request_):
        """now '0001-01-01T00:00:00+23:59' is before year 1 in UTC: a 400 naming now, not a 500 OverflowError."""
        answer = httpx.post(served.http_url, content=json.dumps(request_), headers={"content-type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert "now" in answer.json()["error"]["message"]
