"""retain._redis: redis-py's errors become retain's at one boundary; credentials are their own failure."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from retain import AuthenticationError, MaxLen, ServerUnavailable
from retain.retention import Replicas, RetentionDriver
from retain.servers import RedisServer
from retain.streams import StreamRef, trim

FEED = StreamRef("auth", "feed")
#: redis-py retries a refused AUTH as a connection error (3 times, with backoff): nothing to retry here
ONCE = {"retry": Retry(NoBackoff(), 0)}


@pytest.fixture(scope="module")
def guarded():
    """A Redis that requires a password, with an ACL user who may only read lengths."""
    with RedisServer(config={"requirepass": "s3cret"}) as server:
        with server.client(password="s3cret") as admin:
            admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~*", "+xlen", "+ping")
        yield server


class TestCredentials:
    def test_missing_password_says_how_to_give_one(self, guarded):
        """No password against requirepass: AuthenticationError that says where the password goes, not 'unavailable'."""
        with guarded.client(**ONCE) as conn, pytest.raises(AuthenticationError) as refused:
            trim(conn, FEED, MaxLen(1))
        assert "requires authentication" in str(refused.value) and "redis://:PASSWORD@" in str(refused.value)
        assert not isinstance(refused.value, ServerUnavailable)
        assert isinstance(refused.value.__cause__, redis.exceptions.RedisError)

    @pytest.mark.parametrize("protocol", [2, 3])
    def test_wrong_password(self, guarded, protocol):
        """A wrong password is refused credentials, on RESP2 and RESP3 alike."""
        with guarded.client(password="wrong", protocol=protocol, **ONCE) as conn, pytest.raises(AuthenticationError,
                                                                                        match="refused the credentials"):
            trim(conn, FEED, MaxLen(1))

    def test_acl_denies_the_command(self, guarded):
        """An ACL user without XTRIM is denied the command, named with the key."""
        with guarded.client(username="reader", password="pw", **ONCE) as conn:
            with pytest.raises(AuthenticationError, match=r"denied the command on key 'emq:\{auth\}:stream:feed'"):
                trim(conn, FEED, MaxLen(1))

    def test_a_beat_does_not_back_off_on_credentials(self, guarded):
        """The driver reports refused credentials (per stream; with replicas, as its lease round trip's error)
        and does not treat them as a lost connection."""
        with guarded.client(password="wrong", **ONCE) as conn:
            report = RetentionDriver(conn, [(FEED, MaxLen(1))], replicas=Replicas(enabled=False)).sweep()
            shared = RetentionDriver(conn, [(FEED, MaxLen(1))]).sweep()
        assert isinstance(report.failures[FEED.key], AuthenticationError)
        assert not report.lost_connection
        assert isinstance(shared.lease_error, AuthenticationError) and not shared.lost_connection

    def test_the_daemon_refuses_to_start(self, guarded, tmp_path):
        """retain streams run with a wrong password exits 1 with one line instead of beating in vain."""
        policy = tmp_path / "p.toml"
        policy.write_text(f'url = "redis://:wrong@127.0.0.1:{guarded.port}/0"\n'
                          '[[stream]]\nqueue = "auth"\nname = "feed"\nmaxlen = 1\n')
        # A real process with a deadline: a daemon that wrongly starts must fail the test, not hang it.
        try:
            result = subprocess.run([sys.executable, "-c", "from retain.cli import main; main()", "streams", "run",
                                     str(policy)], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the daemon started with refused credentials")
        assert result.returncode == 1 and "refused the credentials" in result.stderr
        assert "Traceback" not in result.stderr
