"""Tokens and permissions on every logd transport: TCP, Unix socket, HTTP, HTTPS.

Each test makes the attack as it was made against an open logd -- patch without a token, compact
history away, write as ``admin/root`` -- and shows it refused, while the permitted requests run.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from retain.errors import Forbidden, InvalidInput, LimitExceeded, ServerUnavailable, Unauthenticated
from retain.logd import AsyncClient, Client, LogdServer, ServerThread
from retain.servers import free_port
from retain.wire import Tokens
from tests.helpers.auth import SECRETS, token_file
from tests.helpers.logd import LIMITS
from tests.helpers.tls import self_signed
from tests.helpers.waiting import accepts, wait_for


@pytest.fixture
def guarded(store, tmp_path) -> Iterator[ServerThread]:
    """``store`` served with the test tokens on loopback TCP, a Unix socket and HTTP."""
    socket_path = str(tmp_path / "logd.sock")
    with ServerThread(store, listen=("127.0.0.1", 0), http=("127.0.0.1", 0), socket_path=socket_path,
                      limits=LIMITS, tokens=Tokens.load(token_file(tmp_path))) as running:
        running.socket_path = socket_path
        yield running


def addresses(running):
    return [running.address, running.socket_path]


def raw_exchange(address, data: bytes) -> bytes:
    """Send ``data`` and read until the server closes the connection."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(address)
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


class TestStreamTransports:
    @pytest.mark.parametrize("transport", ["tcp", "unix"])
    def test_a_connection_without_a_token_is_refused_and_closed(self, guarded, transport):
        """A patch sent first, with no auth document, is answered unauthenticated, the connection closed, nothing
        written."""
        address = guarded.address if transport == "tcp" else guarded.socket_path
        received = raw_exchange(address, b'{"patch":{"ops":[{"set":"jobs.j1","value":1}]}}\n...\n'
                                         b'{"get":{"path":"jobs"}}\n...\n')
        assert received.count(b"\n...\n") == 1 and b'"code":"unauthenticated"' in received
        assert guarded.server.store.head == 0

    @pytest.mark.parametrize("transport", ["tcp", "unix"])
    def test_an_unknown_token_is_refused(self, guarded, transport):
        """A wrong secret raises Unauthenticated at connect."""
        address = guarded.address if transport == "tcp" else guarded.socket_path
        with pytest.raises(Unauthenticated, match="unknown token"):
            Client(address, token="guess-guess-guess-guess")

    @pytest.mark.parametrize("transport", ["tcp", "unix"])
    def test_each_token_may_what_it_was_given(self, guarded, transport):
        """A reader reads but cannot patch; a writer patches; neither compacts; the admin does."""
        address = guarded.address if transport == "tcp" else guarded.socket_path
        with Client(address, token=SECRETS["writer"]) as writer:
            writer.patch([{"set": "jobs.j1", "value": {"status": "done"}}])
            with pytest.raises(Forbidden, match="may not compact: it needs 'admin'"):
                writer.call("compact", now="9999-01-01T00:00:00Z")
            with pytest.raises(Forbidden, match="may not schema"):
                writer.call("schema", set={})
            with pytest.raises(Forbidden, match="needs 'admin'"):
                writer.call("drop", scope="s")
        with Client(address, token=SECRETS["reader"]) as reader:
            assert reader.get("jobs.j1").value == {"status": "done"}
            with pytest.raises(Forbidden, match="'reader' may not patch: it needs 'write'"):
                reader.patch([{"delete": "jobs.j1"}])
            with pytest.raises(Forbidden, match="needs 'retain'"):
                reader.call("retain", what=[{"path": "jobs.*", "age": "updatedAt", "after": "1d"}])
        with Client(address, token=SECRETS["admin"]) as admin:
            admin.call("compact")
        assert guarded.server.store.head == 1

    def test_authors_outside_the_token_patterns_are_refused(self, guarded):
        """A writer may name verse/* authors; admin/root (in a patch or a session) and control characters are
        refused; with no author the commit is the token's name."""
        with Client(guarded.address, token=SECRETS["writer"]) as writer, \
                Client(guarded.address, token=SECRETS["reader"]) as watcher:
            watcher.watch("jobs", first=1)
            writer.patch([{"set": "jobs.a", "value": 1}])
            writer.patch([{"set": "jobs.b", "value": 1}], author="verse/ops")
            with pytest.raises(Forbidden, match="may not write as author 'admin/root'"):
                writer.patch([{"set": "jobs.c", "value": 1}], author="admin/root")
            with pytest.raises(Forbidden, match="admin/root"):
                writer.call("session", author="admin/root")
            with pytest.raises(Exception, match="control characters"):
                writer.patch([{"set": "jobs.c", "value": 1}], author="verse/root\n\x00x")
            assert [watcher.next_delta()["author"] for _ in range(2)] == ["writer", "verse/ops"]
        assert guarded.server.store.head == 2

    def test_a_client_with_a_token_talks_to_an_open_server(self, served):
        """An open logd answers an auth document too, so a client configured with a token works against it."""
        with Client(served.address, token=SECRETS["writer"], author="admin/root") as client:
            client.patch([{"set": "jobs.j1", "value": 1}])


class TestHttp:
    def test_401_without_or_with_a_wrong_token(self, guarded):
        """No Authorization, another scheme or an unknown secret: 401 with the wire's unauthenticated error."""
        body = '{"patch":{"ops":[{"set":"jobs.j1","value":1}]}}'
        for headers in ({}, {"authorization": "Basic eDp5"}, {"authorization": "Bearer nope-nope-nope-nope"}):
            answer = httpx.post(guarded.http_url, content=body, headers={"content-type": "application/json",
                                                                           **headers})
            assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthenticated"
        assert guarded.server.store.head == 0

    def test_403_when_not_permitted(self, guarded):
        """A reader's patch, a writer's compact and an author outside the globs are 403 forbidden; the writer's
        own patch is 200."""
        def post(secret, body, **headers):
            return httpx.post(guarded.http_url, json=body, headers={"authorization": f"Bearer {secret}", **headers})

        patch = {"patch": {"ops": [{"set": "jobs.j1", "value": 1}]}}
        assert post(SECRETS["reader"], patch).status_code == 403
        assert post(SECRETS["writer"], {"compact": {"now": "9999-01-01T00:00:00Z"}}).status_code == 403
        refused = post(SECRETS["writer"], patch, **{"logd-author": "admin/root"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        assert post(SECRETS["writer"], patch, **{"logd-author": "verse/ci"}).status_code == 200
        assert post(SECRETS["reader"], {"get": {"path": "jobs.j1"}}).json()["result"]["get"]["value"] == 1

    def test_https(self, store, tmp_path):
        """With --tls-cert/--tls-key HTTP is served over TLS; a client trusting the certificate gets its answer."""
        openssl = shutil.which("openssl")
        assert openssl is not None, "openssl is needed to make the test certificate"
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                        str(cert)], check=True, capture_output=True)
        with ServerThread(store, http=("127.0.0.1", 0), tls=(str(cert), str(key)),
                          tokens=Tokens.load(token_file(tmp_path))) as running:
            host, port = running.server.http_address
            answer = httpx.post(f"https://{host}:{port}/", json={"get": {"path": "jobs"}}, verify=ssl.create_default_context(cafile=str(cert)),
                                headers={"authorization": f"Bearer {SECRETS['reader']}"})
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
            with pytest.raises(httpx.HTTPError):
                httpx.post(f"http://{host}:{port}/", json={"get": {"path": "jobs"}}, timeout=5)


class TestOpenServers:
    @pytest.mark.parametrize("where", [{"listen": ("0.0.0.0", 0)}, {"http": ("0.0.0.0", 0)}])
    def test_a_non_loopback_address_without_tokens_refuses_to_start(self, store, where):
        """Serving 0.0.0.0 without tokens is refused before anything binds, unless insecure."""
        with pytest.raises(InvalidInput, match="refusing to serve 0.0.0.0 without tokens"):
            LogdServer(store, **where)
        LogdServer(store, insecure=True, **where)


class TestCli:
    def test_request_presents_token_or_retain_token(self, guarded, tmp_path):
        """`retain logd request --token` (or RETAIN_TOKEN) presents the token; without one the request fails."""
        from click.testing import CliRunner

        from retain.cli import main

        requests = tmp_path / "requests.yaml"
        requests.write_text("{patch: {ops: [{set: jobs.j1, value: 1}]}}\n...\n{get: {path: jobs.j1}}\n")
        connect = "{}:{}".format(*guarded.address)
        runner = CliRunner()
        refused = runner.invoke(main, ["logd", "request", str(requests), "--connect", connect])
        assert refused.exit_code != 0 and guarded.server.store.head == 0
        by_flag = runner.invoke(main, ["logd", "request", str(requests), "--connect", connect, "--json",
                                       "--token", SECRETS["writer"]])
        assert by_flag.exit_code == 0, by_flag.output
        assert '{"result":{"get":{"commit":1,"value":1}}}' in by_flag.output
        by_env = runner.invoke(main, ["logd", "request", str(requests), "--connect", connect],
                               env={"RETAIN_TOKEN": SECRETS["writer"]})
        assert by_env.exit_code == 0 and guarded.server.store.head == 2


def _serve(tmp_path, *args: str) -> subprocess.Popen:
    """`retain logd serve` with ``args``, in a process of its own (stderr piped)."""
    return subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve", "--db",
                             str(tmp_path / "tls.sqlite3"), *args], stderr=subprocess.PIPE, text=True)


class TestTls:
    @pytest.mark.parametrize("damage, says", [("other key", "the key is not the certificate's"),
                                              ("not PEM", "cannot serve")])
    def test_a_bad_certificate_or_key_fails_the_start(self, tmp_path, damage, says):
        """`serve --http --tls-cert A --tls-key B` with B not A's key, or A not a certificate: one line naming both
        files, exit 1, no store made (it logged "serving ... http://..." and ran on without its HTTP listener)."""
        cert, key = self_signed(tmp_path, "a")
        if damage == "other key":
            _, key = self_signed(tmp_path, "b")
        else:
            cert.write_text("not a certificate\n")
        process = _serve(tmp_path, "--http", f"127.0.0.1:{free_port()}", "--tls-cert", str(cert), "--tls-key", str(key))
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        lines = stderr.strip().splitlines()
        assert process.returncode == 1 and len(lines) == 1, stderr
        assert str(cert) in lines[0] and str(key) in lines[0] and says in lines[0]
        assert not (tmp_path / "tls.sqlite3").exists()

    def test_the_stream_listener_speaks_tls(self, tmp_path):
        """--tls-cert/--tls-key serve --listen over TLS: a Client given tls=CA presents its token and is answered,
        `retain logd request --tls-ca` too; a client in clear gets no answer (tokens crossed --listen in clear)."""
        from click.testing import CliRunner

        from retain.cli import main

        cert, key = self_signed(tmp_path)
        port = free_port()
        process = _serve(tmp_path, "--listen", f"127.0.0.1:{port}", "--tokens", str(token_file(tmp_path)),
                         "--tls-cert", str(cert), "--tls-key", str(key))
        try:
            wait_for(lambda: accepts(port), "logd to listen", child=process)
            with Client(("127.0.0.1", port), token=SECRETS["writer"], tls=str(cert)) as client:
                assert client.patch([{"set": "jobs.j1", "value": 1}]).commit == 1
            with pytest.raises(ServerUnavailable):
                with Client(("127.0.0.1", port), token=SECRETS["writer"], timeout=10) as clear:
                    clear.get("jobs.j1")
            with pytest.raises(ServerUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
                Client(("127.0.0.1", port), token=SECRETS["writer"], tls=True)
            answer = CliRunner().invoke(main, ["logd", "request", "-", "--connect", f"127.0.0.1:{port}", "--json",
                                               "--token", SECRETS["reader"], "--tls-ca", str(cert)],
                                        input="{get: {path: jobs.j1}}")
            assert answer.exit_code == 0 and answer.output == '{"result":{"get":{"commit":1,"value":1}}}\n'
        finally:
            process.kill()
            process.wait(timeout=30)

    def test_async_client_speaks_tls(self, store, tmp_path):
        """AsyncClient.connect(tls=CA) reaches a LogdServer given tls=(cert, key)."""
        cert, key = self_signed(tmp_path)

        async def talk(address) -> int:
            client = await AsyncClient.connect(address, tls=str(cert))
            async with client:
                return (await client.patch([{"set": "jobs.j1", "value": 1}])).commit

        with ServerThread(store, listen=("127.0.0.1", 0), tls=(str(cert), str(key))) as running:
            assert asyncio.run(talk(running.address)) == 1

    def test_the_schedule_and_docd_reach_a_logd_over_tls(self, store, tmp_path):
        """A logd whose listener speaks TLS is reached by the schedule (ScheduleConfig.tls, --tls-ca) and by docd
        (DocdConfig.owner_tls, --owner-tls-ca) given its CA; without it, neither gets an answer."""
        from retain.docd import DocdServer, parse_mounts
        from retain.logd.schedule import parse_schedule
        from retain.logd.schedule_daemon import ScheduleConfig, send_once
        from retain.wire import ThreadedServer

        cert, key = self_signed(tmp_path)
        schedule = parse_schedule('every = "1h"\n[[rule]]\npath = "jobs.*"\nage = ".at"\nafter = "1d"\n')
        with ServerThread(store, listen=("127.0.0.1", 0), tls=(str(cert), str(key))) as running:
            where = "{}:{}".format(*running.address)
            answer = send_once(ScheduleConfig(schedule, connect=where, tls=str(cert)))
            assert answer["result"]["retain"]["deleted"] == 0, answer
            with pytest.raises(ServerUnavailable):
                send_once(ScheduleConfig(schedule, connect=where))
            table = parse_mounts(f'logd = "{where}"\n')
            for owner_tls, answered in ((str(cert), True), (None, False)):
                path = str(tmp_path / f"docd-{answered}.sock")
                with ThreadedServer(DocdServer(table, socket_path=path, owner_tls=owner_tls)):
                    with Client(path) as client:
                        got = client.request({"get": {"path": "jobs"}})
                assert ("error" not in got or got["error"]["code"] == "not_found") is answered, got

    def test_tokens_in_clear_off_loopback_are_refused(self, tmp_path):
        """A non-loopback --listen with tokens and no TLS refuses to start, saying how to fix it; --insecure or
        TLS lets it."""
        from click.testing import CliRunner

        from retain.cli import main

        db = tmp_path / "never.sqlite3"
        result = CliRunner().invoke(main, ["logd", "serve", "--db", str(db), "--listen", "0.0.0.0:7420",
                                           "--tokens", str(token_file(tmp_path))])
        assert result.exit_code == 1 and not db.exists(), result.output
        assert "refusing to take tokens in clear on 0.0.0.0" in result.output
        assert "--tls-cert FILE --tls-key FILE, or --insecure" in result.output

    def test_tokens_in_clear_off_loopback_library(self, store, tmp_path):
        """The server refuses tokens in clear on 0.0.0.0 unless insecure or given TLS (before anything binds)."""
        cert, key = self_signed(tmp_path)
        tokens = Tokens.load(token_file(tmp_path))
        with pytest.raises(InvalidInput, match="refusing to take tokens in clear on 0.0.0.0"):
            LogdServer(store, listen=("0.0.0.0", 0), tokens=tokens)
        LogdServer(store, listen=("0.0.0.0", 0), tokens=tokens, insecure=True)
        LogdServer(store, listen=("0.0.0.0", 0), tokens=tokens, tls=(str(cert), str(key)))


class TestScopes:
    def test_a_read_only_token_makes_no_scope(self, guarded):
        """A token that may only read cannot make scopes: `get` with `Logd-Scope: junk-N` made one each (300 in
        the attack, each a max() over the commit log on the writer); now 403, and on a stream `forbidden`. It
        still reads in a scope a writer made."""
        url = "http://{}:{}/".format(*guarded.server.http_address)
        reader = {"authorization": f"Bearer {SECRETS['reader']}"}
        for n in range(3):
            answer = httpx.post(url, json={"get": {}}, headers={**reader, "logd-scope": f"junk-{n}"})
            assert answer.status_code == 403 and "may not create the scope 'junk-" in answer.json()["error"]["message"]
        with pytest.raises(Forbidden, match="needs 'write'"):
            Client(guarded.address, token=SECRETS["reader"], scope="junk-stream")
        assert guarded.server.store.scopes() == []
        with Client(guarded.address, token=SECRETS["writer"], scope="trial") as writer:
            writer.patch([{"set": "jobs.j1", "value": 1}])
        answer = httpx.post(url, json={"get": {"path": "jobs.j1"}}, headers={**reader, "logd-scope": "trial"})
        assert answer.status_code == 200 and answer.json()["result"]["get"]["value"] == 1
        with Client(guarded.address, token=SECRETS["reader"], scope="trial") as client:
            assert client.get("jobs.j1").value == 1

    def test_live_scopes_are_capped_per_token_and_in_all(self, open_store, tmp_path):
        """A token makes at most limits.scopesPerToken live scopes, the store holds at most limits.scopes; each
        refusal names its limit, and a dropped scope frees its place."""
        store = open_store("caps.sqlite3", max_scopes=3, max_scopes_per_token=2)
        with ServerThread(store, listen=("127.0.0.1", 0), tokens=Tokens.load(token_file(tmp_path))) as running:
            def make(token: str, scope: str) -> None:
                Client(running.address, token=SECRETS[token], scope=scope).close()

            make("writer", "w1")
            make("writer", "w2")
            make("writer", "w1")  # live already: not a new one
            with pytest.raises(LimitExceeded, match="token 'writer' has made 2 live scopes and the limit "
                                                    "limits.scopesPerToken is 2"):
                make("writer", "w3")
            make("admin", "a1")
            with pytest.raises(LimitExceeded, match="3 scopes are live and the limit limits.scopes is 3"):
                make("admin", "a2")
            with Client(running.address, token=SECRETS["admin"]) as admin:
                admin.call("drop", scope="w1")
            make("writer", "w3")
            assert sorted(scope.name for scope in store.scopes()) == ["a1", "w2", "w3"]
