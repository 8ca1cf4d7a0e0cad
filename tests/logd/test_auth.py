"""Tokens and permissions on every logd transport: TCP, Unix socket, HTTP, HTTPS.

Each test makes the attack as it was made against an open logd -- patch without a token, compact
history away, write as ``admin/root`` -- and shows it refused, while the permitted requests run.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from retain.errors import Forbidden, InvalidInput, Unauthenticated
from retain.logd import Client, LogdServer, ServerThread
from retain.wire import Tokens
from tests.helpers.auth import SECRETS, token_file
from tests.helpers.logd import LIMITS


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
