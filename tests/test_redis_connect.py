"""Redis the way operators run it, through the real one-shot commands: ACL users, requirepass, TLS, Sentinel, Cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retain._redis import TlsFiles, redis_client
from retain.errors import InvalidInput, ServerStartError
from retain.servers import RedisServer, SentinelServer, free_port
from tests.helpers.streams import append

RUN = "from retain.cli import main; main()"
FEED = "emq:{game}:stream:feed"


def retain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=120)


def trim(url: str, *options: str) -> subprocess.CompletedProcess[str]:
    return retain("streams", "trim", "game", "feed", "--maxlen", "10", "--exact", "--url", url, *options)


class TestUrls:
    @pytest.mark.parametrize("url, says", [
        ("redis+sentinel://127.0.0.1:26379", "name the service"),
        ("redis+sentinel://127.0.0.1/svc", "'127.0.0.1' is not HOST:PORT"),
        ("redis+sentinel://127.0.0.1:1/svc/zero", "name the service (and a db number)"),
        ("redis+sentinel://127.0.0.1:1/svc?color=red", "takes ?sentinel_password= and ?sentinel_username= only"),
        ("http://127.0.0.1:1/0", "a Redis URL starts with redis://"),
    ])
    def test_malformed_urls_are_refused_before_io(self, url, says):
        """A URL that is none of the forms is refused naming what was expected, with no connection tried."""
        with pytest.raises(InvalidInput) as refused:
            redis_client(url)
        assert says in str(refused.value)

    def test_tls_files_need_rediss(self, tmp_path):
        """TLS files with a redis:// URL are refused: they would be silently ignored."""
        ca = tmp_path / "ca.pem"
        ca.write_text("x")
        with pytest.raises(InvalidInput, match="need a rediss:// URL"):
            redis_client("redis://127.0.0.1:1/0", tls=TlsFiles(ca=str(ca)))

    def test_missing_tls_file_is_named(self, tmp_path):
        """A CA file that is not there is named, through the command, exit 1, no traceback."""
        result = trim("rediss://127.0.0.1:1/0", "--tls-ca", str(tmp_path / "absent.pem"))
        assert result.returncode == 1 and "absent.pem does not exist" in result.stderr
        assert "Traceback" not in result.stderr

    def test_sentinel_with_cluster_is_refused(self):
        """A Sentinel URL names one master: --cluster with it is a clear error."""
        result = trim("redis+sentinel://127.0.0.1:1/svc", "--cluster")
        assert result.returncode == 2 and "cannot also be a cluster" in result.stderr


class TestPasswordsNeverShown:
    """A malformed URL holding a password: refused in one line that names its source, hides the password and says
    how to escape; never a traceback."""

    PASSWORDS = ["hunter2@127.0.0.1:notaport", "hun/ter2@127.0.0.1:6379", "hun[ter2@127.0.0.1:6379"]

    @staticmethod
    def _refused(result: subprocess.CompletedProcess[str], source: str) -> None:
        assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
        assert "hun" not in result.stderr and "ter2" not in result.stderr, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
        assert len(errors) == 1, result.stderr
        assert source in errors[0] and "percent-encode" in errors[0] and "%2F" in errors[0]

    @pytest.mark.parametrize("netloc", PASSWORDS, ids=["port", "slash", "bracket"])
    def test_from_the_url_option(self, netloc):
        """--url on a one-shot command."""
        self._refused(trim(f"redis://:{netloc}/0"), "--url")

    @pytest.mark.parametrize("netloc", PASSWORDS, ids=["port", "slash", "bracket"])
    def test_from_the_environment(self, netloc):
        """$RETAIN_REDIS_URL is named as the source, not --url."""
        result = subprocess.run([sys.executable, "-c", RUN, "streams", "trim", "game", "feed", "--maxlen", "10"],
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "RETAIN_REDIS_URL": f"redis://:{netloc}/0"})
        self._refused(result, "$RETAIN_REDIS_URL")

    @pytest.mark.parametrize("netloc", PASSWORDS, ids=["port", "slash", "bracket"])
    def test_from_the_policy_file(self, netloc, tmp_path):
        """A policy file's url is refused naming the file and its field, before anything connects."""
        policy = tmp_path / "retain.toml"
        policy.write_text(f'url = "redis://:{netloc}/0"\n[[stream]]\nkey = "k"\nmaxlen = 10\n')
        self._refused(retain("streams", "run", str(policy), "--once"), f"{policy}: field 'url'")

    def test_daemon_names_the_environment(self, tmp_path):
        """`streams run` with the URL from the environment names $RETAIN_REDIS_URL."""
        policy = tmp_path / "retain.toml"
        policy.write_text('[[stream]]\nkey = "k"\nmaxlen = 10\n')
        result = subprocess.run([sys.executable, "-c", RUN, "streams", "run", str(policy), "--once"],
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "RETAIN_REDIS_URL": "redis://:hun/ter2@127.0.0.1:6379/0"})
        self._refused(result, "$RETAIN_REDIS_URL")


class TestAcl:
    def test_acl_user_and_requirepass(self):
        """An ACL user with its password, and the default user's requirepass, both trim; a wrong password says so."""
        with RedisServer(config={"requirepass": "s3cret"}) as server:
            conn = server.client(password="s3cret")
            conn.execute_command("ACL", "SETUSER", "ops", "on", ">ops-pw", "~emq:*", "+@all")
            append(conn, FEED, 30)
            base = f"127.0.0.1:{server.bound_port}/0"
            acl = trim(f"redis://ops:ops-pw@{base}")
            assert acl.returncode == 0 and "removed 20 entries" in acl.stdout and "10 left" in acl.stdout, acl.stderr
            append(conn, FEED, 5)
            assert trim(f"redis://:s3cret@{base}").returncode == 0
            wrong = trim(f"redis://ops:nope@{base}")
            assert wrong.returncode == 1 and "Redis refused the credentials" in wrong.stderr
            assert "Traceback" not in wrong.stderr
            denied = retain("streams", "trim", "--key", "other:feed", "--maxlen", "1", "--url", f"redis://ops:ops-pw@{base}")
            assert denied.returncode == 1 and "this user (its ACL)" in denied.stderr
            conn.close()


def _certificates(directory: Path) -> dict[str, str]:
    """A CA, and a server and a client certificate it signed, for 127.0.0.1 (openssl on PATH)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=retain test CA")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", "/CN=127.0.0.1")
        (directory / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return {name: str(directory / name) for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


class TestTls:
    def test_rediss_with_ca_and_client_certificate(self, tmp_path):
        """rediss:// with --tls-ca, --tls-cert and --tls-key trims over TLS on a loopback TLS port; without the CA
        the server's certificate is refused."""
        if shutil.which("openssl") is None:
            pytest.skip("openssl is not on PATH: no certificates to test TLS with")
        files = _certificates(tmp_path)
        tls_port = free_port()
        config = {"tls-port": str(tls_port), "tls-cert-file": files["server.pem"], "tls-key-file": files["server.key"],
                  "tls-ca-cert-file": files["ca.pem"], "tls-auth-clients": "yes"}
        try:
            server = RedisServer(config=config).start()
        except ServerStartError as exc:  # a binary built without TLS refuses the tls-* options
            pytest.skip(f"this redis-server does not support TLS: {exc}")
        with server:
            conn = server.client()
            append(conn, FEED, 30)
            url = f"rediss://127.0.0.1:{tls_port}/0"
            done = trim(url, "--tls-ca", files["ca.pem"], "--tls-cert", files["client.pem"], "--tls-key",
                        files["client.key"])
            assert done.returncode == 0 and "10 left" in done.stdout, done.stderr
            untrusted = trim(url)
            assert untrusted.returncode == 1 and "Redis unavailable" in untrusted.stderr
            assert "Traceback" not in untrusted.stderr
            conn.close()


class TestSentinel:
    def test_trim_through_sentinel(self):
        """redis+sentinel://HOST:PORT/SERVICE/0 finds the master through a real Sentinel and trims there."""
        with RedisServer() as master, SentinelServer(master, service="feeds") as sentinel:
            conn = master.client()
            append(conn, FEED, 30)
            done = trim(sentinel.url)
            assert done.returncode == 0 and "removed 20 entries" in done.stdout, done.stderr
            assert conn.xlen(FEED) == 10
            unknown = trim(sentinel.url.replace("/feeds/", "/nobody/"))
            assert unknown.returncode == 1 and "nobody" in unknown.stderr and "Traceback" not in unknown.stderr
            conn.close()


class TestCluster:
    def test_one_shot_commands_on_a_cluster(self, tmp_path, redis_cluster):
        """streams trim, archive fold and archive read take --cluster and work against a real Redis Cluster."""
        conn = redis_cluster.client()
        conn.delete(FEED)
        for index in range(30):
            conn.xadd(FEED, {"i": str(index)})
        archive = f"file://{tmp_path / 'archive'}"
        folded = retain("archive", "fold", "game", "feed", "--archive", archive, "--cluster", "--url", redis_cluster.url)
        assert folded.returncode == 0 and "folded 30 entries" in folded.stdout, folded.stderr
        trimmed = trim(redis_cluster.url, "--cluster")
        assert trimmed.returncode == 0 and "10 left" in trimmed.stdout, trimmed.stderr
        read = retain("archive", "read", "game", "feed", "--archive", archive, "--cluster", "--url", redis_cluster.url)
        assert read.returncode == 0 and len(read.stdout.splitlines()) == 30, read.stderr
        conn.delete(FEED)
        conn.close()
