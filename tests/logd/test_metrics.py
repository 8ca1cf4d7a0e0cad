"""LogdMetrics: what a served logd exports, fed answers as its server hands them over."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from retain.logd.metrics import RECENT_RETAINS, LogdMetrics, verb_of

counts = st.integers(min_value=0, max_value=10_000)
rules = st.lists(st.fixed_dictionaries({"path": st.sampled_from(["jobs.*", "events(*)"]), "deleted": counts},
                                       optional={"skipped": counts, "unreadable": counts, "retried": counts}),
                 max_size=4)


def value(metrics: LogdMetrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


class TestVerbOf:
    @given(st.sampled_from(["get", "list", "patch", "retain", "watch", "session"]), st.integers())
    def test_one_verb(self, verb, body):
        """A document of one identifier key is that verb."""
        assert verb_of({verb: body}) == verb

    @given(st.one_of(st.lists(st.integers()), st.dictionaries(st.text(), st.integers(), min_size=2),
                     st.just({}), st.just({"a b": 1}), st.text()))
    def test_anything_else_is_invalid(self, request):
        """Not a one-key map with an identifier: verb 'invalid' (a bounded label set, whatever arrives)."""
        assert verb_of(request) == "invalid"


class TestRetainCounts:
    @given(st.lists(rules, max_size=15))
    def test_counters_are_the_sums_of_the_answers(self, answers):
        """deleted, skipped, retried and unreadable are the sums over every retain answer; the dashboard keeps the last
        few, newest first."""
        metrics = LogdMetrics()
        for number, answered in enumerate(answers):
            body = {"now": "2026-09-12T08:00:00Z", "commit": number, "deleted": sum(r["deleted"] for r in answered),
                    "rules": answered}
            metrics.observe({"retain": {}}, {"result": {"retain": body}}, 0.001)
        every = [rule for answered in answers for rule in answered]
        assert value(metrics, "retain_logd_retain_deleted_total") == sum(rule["deleted"] for rule in every)
        assert value(metrics, "retain_logd_retain_skipped_total") == sum(rule.get("skipped", 0) for rule in every)
        assert value(metrics, "retain_logd_retain_retried_total") == sum(rule.get("retried", 0) for rule in every)
        assert value(metrics, "retain_logd_retain_unreadable_total") == sum(rule.get("unreadable", 0)
                                                                             for rule in every)
        assert value(metrics, "retain_logd_requests_total", verb="retain", outcome="ok") == len(answers)
        recent = metrics.recent_retains()
        assert len(recent) == min(len(answers), RECENT_RETAINS)
        if answers:
            assert f"commit {len(answers) - 1}" in recent[0][1]

    def test_an_error_answer_counts_by_its_code(self):
        """An error answer is counted under its code, and listed among the recent retain answers."""
        metrics = LogdMetrics()
        metrics.observe({"retain": {}}, {"error": {"code": "invalid_retain", "message": "rule #1: no path"}}, 0.01)
        assert value(metrics, "retain_logd_requests_total", verb="retain", outcome="invalid_retain") == 1
        assert value(metrics, "retain_logd_retain_deleted_total") == 0
        assert "error invalid_retain: rule #1: no path" in metrics.recent_retains()[0][1]

    def test_store_size_and_head_read_at_scrape(self, tmp_path):
        """The store's size on disk and head commit are read when scraped."""
        db = tmp_path / "logd.sqlite3"
        db.write_bytes(b"x" * 4096)
        (tmp_path / "logd.sqlite3-wal").write_bytes(b"x" * 100)
        head = [3]
        metrics = LogdMetrics(store_path=str(db), head=lambda: head[0])
        assert value(metrics, "retain_logd_store_size_bytes") == 4196
        head[0] = 9
        assert value(metrics, "retain_logd_head_commit") == 9
