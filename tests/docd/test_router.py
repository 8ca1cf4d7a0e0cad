"""Routing, pure: every request's plan, and the answers put back together, without a socket."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.clock import format_rfc3339
from retain.docd.mounts import MountTable
from retain.docd.router import Fanout, Forward, Owner, SessionChange, answer_forward, answer_retain, delta_from, route
from retain.errors import InvalidPath, InvalidRequest, InvalidRetain, Unsupported
from retain.logd.paths import parse
from retain.wire import Or
from tests.strategies import docd_paths, mount_tables

NOW = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)
TABLE = MountTable.of({"verse.ctl": "unix:/run/verse-ctl.sock", "ci": "127.0.0.1:7501"}, logd="127.0.0.1:7420")
LOGD = Owner("logd", ("127.0.0.1", 7420))
CTL = Owner("verse.ctl", "/run/verse-ctl.sock", parse("verse.ctl"))
CI = Owner("ci", ("127.0.0.1", 7501), parse("ci"))

JOBS = {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"}
RUNS = {"path": "verse.ctl.runs.*", "age": ".at", "after": "7d"}
VERSE = {"path": "verse.*", "age": ".updatedAt", "after": "30d"}
SEED = {"retain": {"now": "2026-09-12T08:00:00Z", "what": [JOBS, RUNS, VERSE]}}


def plan_of(request, table=TABLE, now=NOW):
    return route(request, table, now=now)


def retain_answer(commit, *rules, now="2026-09-12T08:00:00Z"):
    return {"result": {"retain": {"now": now, "commit": commit, "deleted": sum(r.get("deleted", 0) for r in rules),
                                  "rules": list(rules)}}}


UNSUPPORTED = {"error": {"code": "unsupported", "message": "unsupported operation: request type"}}


class TestRouteRetain:
    def test_the_seeds_request(self):
        """Each rule goes to the owner of its container: one request per owner, in order of first rule."""
        plan = plan_of(SEED)
        assert isinstance(plan, Fanout)
        assert plan.now == "2026-09-12T08:00:00Z"
        assert [(sent.owner, sent.request) for sent in plan.requests] == [
            (LOGD, {"retain": {"now": "2026-09-12T08:00:00Z", "what": [JOBS, VERSE]}}),
            (CTL, {"retain": {"now": "2026-09-12T08:00:00Z", "what": [{**RUNS, "path": "runs.*"}]}}),
        ]
        assert [(r.path, r.owner, r.position, r.under) for r in plan.rules] == [
            ("jobs.*", "logd", 0, ()), ("verse.ctl.runs.*", "verse.ctl", 0, ()), ("verse.*", "logd", 1, ("verse.ctl",)),
        ]

    def test_one_now_from_the_clock(self):
        """Without a now, every owner gets docd's clock, read by the caller once, in RFC 3339 UTC."""
        plan = plan_of({"retain": {"what": [JOBS, RUNS]}}, now=datetime(2026, 9, 12, 10, 0, 0, 250,
                                                                         tzinfo=timezone(timedelta(hours=2))))
        assert plan.now == "2026-09-12T08:00:00.000250Z"
        assert {sent.request["retain"]["now"] for sent in plan.requests} == {plan.now}

    def test_whole_seconds_print_without_fraction(self):
        """A clock on a whole second prints as docs/docd.md writes times."""
        assert format_rfc3339(NOW) == "2026-09-12T08:00:00Z"

    def test_the_callers_now_is_kept_as_written(self):
        """A caller's now goes to every owner in the caller's own words; the clock is not used."""
        plan = plan_of({"retain": {"now": "2026-09-12T10:00:00+02:00", "what": [JOBS, RUNS]}})
        assert plan.now == "2026-09-12T10:00:00+02:00"
        assert {sent.request["retain"]["now"] for sent in plan.requests} == {plan.now}

    def test_batch_and_author_reach_every_owner(self):
        """batch and author are the request's: each owner's request carries them."""
        plan = plan_of({"retain": {"batch": 10, "author": "verse/retention", "what": [JOBS, RUNS]}})
        for sent in plan.requests:
            assert list(sent.request["retain"]) == ["now", "batch", "author", "what"]
            assert sent.request["retain"]["batch"] == 10 and sent.request["retain"]["author"] == "verse/retention"

    def test_rule_over_the_mount_point_itself(self):
        """verse.ctl.* is the children of the controller's root: it goes to the controller as *."""
        plan = plan_of({"retain": {"what": [{**RUNS, "path": "verse.ctl.*"}]}})
        assert plan.requests[0].owner == CTL and plan.requests[0].request["retain"]["what"][0]["path"] == "*"

    def test_keyed_rules_and_the_root(self):
        """ci.runs(*) goes to ci as runs(*); * over the root is logd's, with every mount beneath it."""
        plan = plan_of({"retain": {"what": [{**RUNS, "path": "ci.runs(*)"}, {**RUNS, "path": "*"}]}})
        assert [(sent.owner.name, sent.request["retain"]["what"][0]["path"]) for sent in plan.requests] == [
            ("ci", "runs(*)"), ("logd", "*")]
        assert plan.rules[1].under == ("verse.ctl", "ci")

    def test_rules_at_one_owner_keep_their_order(self):
        """An owner's request lists its rules in the order the caller sent them."""
        rules = [{**RUNS, "path": f"verse.ctl.r{index}.*"} for index in range(5)]
        plan = plan_of({"retain": {"what": rules}})
        assert [rule["path"] for rule in plan.requests[0].request["retain"]["what"]] == [
            f"r{index}.*" for index in range(5)]
        assert [rule.position for rule in plan.rules] == list(range(5))

    def test_other_rule_fields_pass_through(self):
        """match, age and after are the owner's to read: docd changes only the path."""
        plan = plan_of({"retain": {"what": [{**JOBS, "path": "ci.jobs.*"}]}})
        assert plan.requests[0].request["retain"]["what"][0] == {**JOBS, "path": "jobs.*"}

    @pytest.mark.parametrize(("body", "message"), [
        ({}, "retain: what is a non-empty list of rules"),
        ({"what": []}, "retain: what is a non-empty list of rules"),
        ({"what": "jobs.*"}, "retain: what is a non-empty list of rules"),
        ({"what": [JOBS], "when": 1}, "retain: unknown field 'when': expected one of now, batch, author, what"),
        ({"what": [JOBS], "now": "yesterday"}, "retain: now must be an RFC 3339 time"),
        ({"what": [JOBS], "now": "2026-09-12T08:00:00"}, "retain: now must be an RFC 3339 time"),
        ({"what": [JOBS], "now": 1757664000}, "retain: now must be an RFC 3339 time"),
        ({"what": [JOBS], "batch": -1}, "retain: batch is the most items one delete commit removes"),
        ({"what": [JOBS, "jobs.*"]}, "retain what[1]: a rule is a map"),
        ({"what": [{"age": ".at"}]}, "retain what[0]: path is required"),
        ({"what": [{**JOBS, "path": "jobs"}]}, "retain what[0]: path jobs names one node"),
        ({"what": [{**JOBS, "path": "jobs.j1"}]}, "names one node"),
        ({"what": [{**JOBS, "path": "list[*]"}]}, "retain what[0]: path list[*] is a dense array"),
        ({"what": [{**JOBS, "path": "jobs..x.*"}]}, "retain what[0]: path 'jobs..x.*': '..' is refused"),
        ({"what": [{**JOBS, "path": "jobs.*.status"}]}, "a wildcard may only be the last segment"),
        ({"what": [RUNS, {**RUNS, "after": "-1d"}]}, "retain what[1] (verse.ctl.runs.*): after must be a positive "
                                                    "duration"),
        ({"what": [{**JOBS, "match": {"updatedAt": "x"}}]}, "match names the age field .updatedAt"),
        ({"what": [JOBS, {**JOBS, "path": "verse.ctl(*)"}]}, "retain what[1]: path 'verse.ctl(*)': the mount "
                                                             "verse.ctl is the root of its controller's tree"),
    ])
    def test_refusals(self, body, message):
        """A retain request that cannot mean what it says is refused whole, as logd refuses it, before any send."""
        with pytest.raises(InvalidRetain) as refused:
            plan_of({"retain": body})
        assert message in str(refused.value)
        assert refused.value.code == "invalid_retain"

    @given(mount_tables(), st.lists(docd_paths().filter(lambda p: p.is_wild), min_size=1, max_size=8))
    def test_every_rule_lands_once_at_its_owner(self, table, paths):
        """Each rule is in exactly one owner's request, at its recorded position, with its path made relative."""
        rules = [{"path": str(path), "age": ".at", "after": "1d"} for path in paths]
        try:
            plan = route({"retain": {"what": rules}}, table, now=NOW)
        except InvalidRetain as refused:  # a keyed wildcard right at a mount point
            assert "is the root of its controller's tree" in str(refused)
            return
        sent = {request.owner.name: request for request in plan.requests}
        assert len(sent) == len(plan.requests)  # one request per owner
        assert sum(len(request.request["retain"]["what"]) for request in plan.requests) == len(rules)
        for rule, routed, path in zip(rules, plan.rules, paths, strict=True):
            owner = sent[routed.owner].owner
            assert routed.path == rule["path"]
            assert owner.name == (table.owner(path.parent).name if table.owner(path.parent) else "logd")
            relative = sent[routed.owner].request["retain"]["what"][routed.position]["path"]
            assert owner.absolute(relative) == rule["path"]
            assert routed.under == tuple(m.name for m in table.beneath(path.parent))


class TestRouteForward:
    @pytest.mark.parametrize(("request_", "owner", "sent", "under"), [
        ({"get": {"path": "jobs.j1", "at": 4}}, LOGD, {"get": {"path": "jobs.j1", "at": 4}}, ()),
        ({"get": {}}, LOGD, {"get": {}}, ("verse.ctl", "ci")),
        ({"get": {"path": "verse"}}, LOGD, {"get": {"path": "verse"}}, ("verse.ctl",)),
        ({"get": {"path": "verse.ctl"}}, CTL, {"get": {}}, ()),
        ({"get": {"path": "verse.ctl.runs(r1).at", "at": 3}}, CTL, {"get": {"path": "runs(r1).at", "at": 3}}, ()),
        ({"list": {"path": "verse.*"}}, LOGD, {"list": {"path": "verse.*"}}, ("verse.ctl",)),
        ({"list": {"path": "verse.ctl.*"}}, CTL, {"list": {"path": "*"}}, ()),
        ({"list": {"path": "ci.runs(*)", "at": 2}}, CI, {"list": {"path": "runs(*)", "at": 2}}, ()),
        ({"list": {"path": "*"}}, LOGD, {"list": {"path": "*"}}, ("verse.ctl", "ci")),
        ({"watch": {"path": "verse.ctl.runs", "from": 7}}, CTL, {"watch": {"path": "runs", "from": 7}}, ()),
        ({"watch": {"path": "ci"}}, CI, {"watch": {}}, ()),
        ({"watch": {}}, LOGD, {"watch": {}}, ("verse.ctl", "ci")),
        ({"watch": {"path": "jobs"}}, LOGD, {"watch": {"path": "jobs"}}, ()),
    ])
    def test_reads_and_watches(self, request_, owner, sent, under):
        """get, list and watch go to the owner of their place, path made relative, other fields untouched."""
        plan = plan_of(request_)
        assert plan == Forward(next(iter(request_)), owner, sent, under)

    def test_patch_at_one_owner(self):
        """Every op and precondition path goes relative to the one owner; values and author pass through."""
        plan = plan_of({"patch": {"ops": [{"set": "verse.ctl.runs.r1", "value": {"at": "x"}},
                                          {"delete": "verse.ctl.runs.r0"},
                                          {"append": "verse.ctl.events", "value": {"k": 1}}],
                                  "if": {"verse.ctl.runs.r0": {"status": "done"}}, "author": "verse/ops"}})
        assert plan == Forward("patch", CTL, {"patch": {
            "ops": [{"set": "runs.r1", "value": {"at": "x"}}, {"delete": "runs.r0"},
                    {"append": "events", "value": {"k": 1}}],
            "if": {"runs.r0": {"status": "done"}}, "author": "verse/ops"}})

    def test_patch_at_logd(self):
        """A patch of base paths goes to logd unchanged."""
        body = {"ops": [{"set": "jobs.j1", "value": 1}], "if": {"jobs.j1": 0}}
        assert plan_of({"patch": body}) == Forward("patch", LOGD, {"patch": body})

    def test_empty_patch_goes_to_logd(self):
        """A patch naming no path at all is logd's to answer."""
        assert plan_of({"patch": {"ops": []}}).owner == LOGD

    @pytest.mark.parametrize(("body", "message"), [
        ({"ops": [{"set": "jobs.j1", "value": 1}, {"delete": "verse.ctl.runs.r1"}]},
         "a patch is one commit at one owner, and this one spans logd (op #1 at jobs.j1) and verse.ctl "
         "(op #2 at verse.ctl.runs.r1): send one patch per owner"),
        ({"ops": [{"set": "jobs.j1", "value": 1}], "if": {"ci.runs.r1": 1}},
         "spans logd (op #1 at jobs.j1) and ci (if ci.runs.r1 at ci.runs.r1)"),
        ({"ops": [{"delete": "verse"}]}, "patch op #1: verse holds the mount verse.ctl: a write stops at a mount"),
        ({"ops": [{"set": "verse.ctl", "value": {}}]}, "patch op #1: verse.ctl holds the mount verse.ctl"),
        ({"ops": [{"set": "jobs.j1", "value": 1}], "if": {"verse": {}}}, "patch if verse: verse holds the mount"),
        ({}, "patch needs ops"),
        ({"ops": {"set": "a"}}, "patch needs ops"),
        ({"ops": [{"value": 1}]}, "patch op #1 must name one path"),
        ({"ops": [{"set": "a", "delete": "b"}]}, "patch op #1 must name one path"),
        ({"ops": ["a"]}, "patch op #1 must name one path"),
        ({"ops": [], "if": ["a"]}, "if is a map from path to pattern"),
    ])
    def test_patch_refusals(self, body, message):
        """A patch spanning owners, or writing over a mount, is refused before anything is sent."""
        with pytest.raises(InvalidRequest) as refused:
            plan_of({"patch": body})
        assert message in str(refused.value)

    @pytest.mark.parametrize(("request_", "error", "message"), [
        ({"get": {"path": "jobs..x"}}, InvalidPath, "'..' is refused"),
        ({"get": {"path": 3}}, InvalidPath, "a path must be a string"),
        ({"list": {}}, InvalidRequest, "list needs a path ending in a wildcard"),
        ({"list": {"path": "verse.ctl(*)"}}, InvalidRequest, "the mount verse.ctl is the root of its controller's"),
        ({"patch": {"ops": [{"set": "a/b", "value": 1}]}}, InvalidPath, "'/' is not allowed"),
        ({"schema": {}}, Unsupported, "unsupported operation: request type 'schema' (docd routes get, list, "
                                      "patch, retain, session, watch"),
        ({"compact": {}}, Unsupported, "request type 'compact'"),
        ([], InvalidRequest, "a request is a map"),
        ({"get": {}, "list": {}}, InvalidRequest, "exactly one verb"),
    ])
    def test_refusals(self, request_, error, message):
        """Requests docd cannot route are refused with what was wrong, before anything is sent."""
        with pytest.raises(error) as refused:
            plan_of(request_)
        assert message in str(refused.value)


class TestRouteSession:
    def test_session(self):
        """A session names an author and/or a scope for every owner."""
        assert plan_of({"session": {"author": "verse/ops", "scope": "trial-1"}}) == SessionChange("verse/ops",
                                                                                                  "trial-1")
        assert plan_of({"session": {}}) == SessionChange(None, None)

    @pytest.mark.parametrize(("body", "message"), [
        ({"author": ""}, "an author is a string of 1-256 characters"),
        ({"author": 3}, "an author is a string"),
        ({"scope": "a b"}, "scope name 'a b' contains ' '"),
        ({"who": "x"}, "session: unknown field 'who'"),
    ])
    def test_refusals(self, body, message):
        """A session docd could not hand on is refused."""
        with pytest.raises(InvalidRequest, match=message):
            plan_of({"session": body})


class TestAnswerRetain:
    def test_the_seeds_answer(self):
        """logd ran two rules, the controller does not implement retain: docs/docd.md's answer, exactly."""
        answers = {"logd": retain_answer(4127, {"path": "jobs.*", "deleted": 300}, {"path": "verse.*", "deleted": 0}),
                   "verse.ctl": UNSUPPORTED}
        assert answer_retain(plan_of(SEED), answers) == {"result": {"retain": {
            "now": "2026-09-12T08:00:00Z", "commit": 4127, "deleted": 300, "rules": [
                {"path": "jobs.*", "deleted": 300, "owner": "logd"},
                {"path": "verse.ctl.runs.*", "owner": "verse.ctl",
                 "error": {"code": "unsupported", "message": "unsupported operation: request type"}},
                {"path": "verse.*", "deleted": 0, "owner": "logd", "under": ["verse.ctl"]},
            ]}}}

    def test_field_order_is_the_seeds(self):
        """Each rule reads path, the owner's counts, owner, under, error; the top level now, commit, deleted, rules."""
        answers = {"logd": retain_answer(9, {"path": "jobs.*", "deleted": 3, "unreadable": 2, "skipped": 1,
                                             "retried": 4},
                                         {"path": "verse.*", "deleted": 0}),
                   "verse.ctl": UNSUPPORTED}
        result = answer_retain(plan_of(SEED), answers)["result"]["retain"]
        assert list(result) == ["now", "commit", "deleted", "rules"]
        assert [list(rule) for rule in result["rules"]] == [
            ["path", "deleted", "unreadable", "skipped", "retried", "owner"], ["path", "owner", "error"],
            ["path", "deleted", "owner", "under"]]

    def test_a_controller_that_ran_carries_its_commit(self):
        """A controller's commits are numbered its own way: its rules say which; the top-level commit is logd's."""
        answers = {"logd": retain_answer(4127, {"path": "jobs.*", "deleted": 300}, {"path": "verse.*", "deleted": 0}),
                   "verse.ctl": retain_answer(12, {"path": "runs.*", "deleted": 5, "unreadable": 1})}
        result = answer_retain(plan_of(SEED), answers)["result"]["retain"]
        assert result["commit"] == 4127 and result["deleted"] == 305
        assert result["rules"][1] == {"path": "verse.ctl.runs.*", "deleted": 5, "unreadable": 1, "commit": 12,
                                      "owner": "verse.ctl"}

    def test_without_logd_there_is_no_top_level_commit(self):
        """When logd had no rule (or did not run), the top level has no commit; the rules carry theirs."""
        plan = plan_of({"retain": {"now": "2026-09-12T08:00:00Z", "what": [RUNS]}})
        result = answer_retain(plan, {"verse.ctl": retain_answer(3, {"path": "runs.*", "deleted": 1})})
        assert result == {"result": {"retain": {"now": "2026-09-12T08:00:00Z", "deleted": 1, "rules": [
            {"path": "verse.ctl.runs.*", "deleted": 1, "commit": 3, "owner": "verse.ctl"}]}}}

    def test_an_owner_down_fails_only_its_rules(self):
        """logd unreachable: its rules carry the error, the controller's ran and count."""
        down = {"error": {"code": "unavailable", "message": "logd at 127.0.0.1:7420 is unavailable: refused"}}
        answers = {"logd": down, "verse.ctl": retain_answer(3, {"path": "runs.*", "deleted": 2})}
        result = answer_retain(plan_of(SEED), answers)["result"]["retain"]
        assert "commit" not in result and result["deleted"] == 2
        assert result["rules"] == [
            {"path": "jobs.*", "owner": "logd", "error": down["error"]},
            {"path": "verse.ctl.runs.*", "deleted": 2, "commit": 3, "owner": "verse.ctl"},
            {"path": "verse.*", "owner": "logd", "under": ["verse.ctl"], "error": down["error"]}]

    def test_nothing_ran_is_an_error_for_the_request(self):
        """No owner ran: the answer is one error, the first failing owner's code, every owner's message."""
        down = {"error": {"code": "unavailable", "message": "logd at 127.0.0.1:7420 is unavailable: refused"}}
        assert answer_retain(plan_of(SEED), {"logd": down, "verse.ctl": UNSUPPORTED}) == {"error": {
            "code": "unavailable", "message": "nothing ran: logd: logd at 127.0.0.1:7420 is unavailable: refused; "
                                             "verse.ctl: unsupported operation: request type"}}

    @pytest.mark.parametrize("answer", [
        {"result": {"retain": {"commit": 1, "rules": []}}},
        {"result": {"retain": {"commit": 1, "rules": [{"deleted": 1}, {"deleted": 1}, {"deleted": 1}]}}},
        {"result": {"retain": {"commit": 1, "rules": [{"deleted": -1}, {"deleted": 0}]}}},
        {"result": {"retain": {"commit": 1, "rules": [{"deleted": "3"}, {"deleted": 0}]}}},
        {"result": {"retain": {"rules": [{"deleted": 1}, {"deleted": 0}]}}},
        {"result": {"retain": {"commit": 1, "rules": ["x", {"deleted": 0}]}}},
        {"result": {"get": {}}},
    ])
    def test_an_answer_docd_cannot_read_fails_that_owner(self, answer):
        """A malformed answer is that owner's storage_error (or its error as sent); it is never half-read."""
        answers = {"logd": answer, "verse.ctl": retain_answer(3, {"path": "runs.*", "deleted": 2})}
        result = answer_retain(plan_of(SEED), answers)["result"]["retain"]
        assert result["deleted"] == 2
        assert [rule["error"]["code"] for rule in result["rules"] if "error" in rule] == [
            "storage_error", "storage_error"]

    @given(st.data())
    def test_rule_order_is_the_callers_whatever_the_owners(self, data):
        """Rules over any owners come back in the order sent, each with what its own owner said of it."""
        owners = ["jobs", "verse.ctl", "ci", "verse"]
        picks = data.draw(st.lists(st.sampled_from(owners), min_size=1, max_size=12))
        rules = [{"path": f"{owner}.r{index}.*", "age": ".at", "after": "1d"} for index, owner in enumerate(picks)]
        plan = plan_of({"retain": {"now": "2026-09-12T08:00:00Z", "what": rules}})
        # Each owner says of each rule it got: deleted = the rule's index in the caller's request.
        answers = {sent.owner.name: retain_answer(7, *({"path": rule["path"],
                                                        "deleted": int(re.search(r"r(\d+)", rule["path"])[1])}
                                                       for rule in sent.request["retain"]["what"]))
                   for sent in plan.requests}
        result = answer_retain(plan, answers)["result"]["retain"]
        assert [rule["path"] for rule in result["rules"]] == [rule["path"] for rule in rules]
        assert [rule["deleted"] for rule in result["rules"]] == list(range(len(rules)))


class TestAnswerForward:
    def test_result_gains_owner_and_under(self):
        """A read's result says who answered and which mounts beneath it did not answer."""
        plan = plan_of({"list": {"path": "verse.*"}})
        answer = {"result": {"list": {"commit": 4, "items": {"x": 1}}}}
        assert answer_forward(plan, answer) == {"result": {"list": {"commit": 4, "items": {"x": 1}, "owner": "logd",
                                                                    "under": ["verse.ctl"]}}}

    def test_watch_path_is_the_callers(self):
        """A watch answered by a controller names the caller's path."""
        plan = plan_of({"watch": {"path": "verse.ctl.runs"}})
        assert answer_forward(plan, {"result": {"watch": {"path": "runs", "from": 3, "commit": 2}}}) == {
            "result": {"watch": {"path": "verse.ctl.runs", "from": 3, "commit": 2, "owner": "verse.ctl"}}}
        whole = plan_of({"watch": {"path": "verse.ctl"}})
        assert answer_forward(whole, {"result": {"watch": {"path": "", "from": 1, "commit": 0}}})["result"][
            "watch"]["path"] == "verse.ctl"

    def test_errors_pass_through(self):
        """The owner's error is the caller's, word for word."""
        error = {"error": {"code": "not_found", "message": "runs.r9 does not exist at commit 3"}}
        assert answer_forward(plan_of({"get": {"path": "verse.ctl.runs.r9"}}), error) is error

    def test_unreadable_answer(self):
        """An answer without the verb's result is a storage_error naming the owner."""
        answer = answer_forward(plan_of({"get": {"path": "ci.x"}}), {"result": {"list": {}}})
        assert answer["error"]["code"] == "storage_error" and "ci answered get" in answer["error"]["message"]

    def test_delta_paths_are_the_callers(self):
        """A controller's delta names the caller's paths, and its owner."""
        delta = {"commit": 4, "author": "a", "time": "t", "ops": [{"set": "runs(r1)", "value": {"at": "x"}},
                                                                 {"delete": "runs.r0"}, {"schema": {}}]}
        assert delta_from(CTL, delta) == {"delta": {"commit": 4, "author": "a", "time": "t", "ops": [
            {"set": "verse.ctl.runs(r1)", "value": {"at": "x"}}, {"delete": "verse.ctl.runs.r0"}, {"schema": {}}],
            "owner": "verse.ctl"}}
        assert delta_from(LOGD, delta)["delta"]["ops"] == delta["ops"]
