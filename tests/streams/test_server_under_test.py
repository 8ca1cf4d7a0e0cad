"""The server the live-tier tests run on: exactly the one ``dev.py servers`` asked for, else any.

``dev.py servers`` runs the streams, retention and archive tests on Valkey and
on Redis 6.2, setting ``RETAIN_REDIS_SERVER`` to the binary and
``RETAIN_EXPECT_SERVER`` to its name: this test makes each run prove which
server it ran on.
"""

from __future__ import annotations

import os


def server_name(info: dict) -> str:
    """``valkey``, or ``redis-<major>.<minor>``, from INFO server."""
    if "valkey_version" in info or info.get("server_name") == "valkey":
        return "valkey"
    major, minor, *_ = str(info["redis_version"]).split(".")
    return f"redis-{major}.{minor}"


class TestServerUnderTest:
    def test_runs_on_the_expected_server(self, redis_conn):
        """The fixtures' server is RETAIN_EXPECT_SERVER when that is set (dev.py servers)."""
        expected = os.environ.get("RETAIN_EXPECT_SERVER")
        found = server_name(redis_conn.info("server"))
        assert expected is None or found == expected, f"ran on {found}, expected {expected}"
