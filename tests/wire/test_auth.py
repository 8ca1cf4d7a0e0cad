"""Token files, permissions and author patterns, pure: what a token may do, refused before any I/O."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.errors import Forbidden, InvalidInput, InvalidRequest, Unauthenticated
from retain.wire import Tokens, check_author, refuse_open
from tests.helpers.auth import SECRETS, tokens


class TestTokens:
    def test_a_secret_finds_its_token(self, tmp_path):
        """Each secret (plain or given as its SHA-256) finds its own token; anything else none."""
        known = tokens(tmp_path)
        for name, secret in SECRETS.items():
            assert known.find(secret).name == name
        assert known.find("writer-secret-012345678") is None
        assert known.find("") is None and known.find(None) is None

    def test_unknown_and_missing_tokens_are_unauthenticated(self, tmp_path):
        """No token and an unknown one are both Unauthenticated, the message saying how to present one."""
        known = tokens(tmp_path)
        with pytest.raises(Unauthenticated, match="needs a token"):
            known.present(None)
        with pytest.raises(Unauthenticated, match="unknown token"):
            known.present("nope-nope-nope-nope")
        with pytest.raises(Unauthenticated, match="Bearer"):
            known.bearer({"authorization": "Basic abc"})
        assert known.bearer({"authorization": f"Bearer {SECRETS['admin']}"}).name == "admin"

    def test_repr_shows_no_secret(self, tmp_path):
        """Neither the tokens nor a token show a secret or its hash."""
        known = tokens(tmp_path)
        shown = repr(known) + "".join(repr(token) for token in known.tokens)
        for secret in SECRETS.values():
            assert secret not in shown and hashlib.sha256(secret.encode()).hexdigest() not in shown

    @pytest.mark.parametrize("toml, expected", [
        ("[[token]]\nname = 'a'\nmay = ['read']\n", "give secret or secret_sha256"),
        ("[[token]]\nname = 'a'\nsecret = 'short'\n", "at least 16"),
        ("[[token]]\nname = 'a'\nsecret_sha256 = 'xyz'\n", "64 hex digits"),
        ("[[token]]\nname = 'a'\nsecret = 'aaaaaaaaaaaaaaaaaaaa'\nmay = ['root']\n", "may is a list of read"),
        ("[[token]]\nname = 'a'\nsecret = 'aaaaaaaaaaaaaaaaaaaa'\nauthors = []\n", "authors is a non-empty list"),
        ("[[token]]\nname = 'a'\nsecret = 'aaaaaaaaaaaaaaaaaaaa'\ncolour = 1\n", "unknown field 'colour'"),
        ("[[token]]\nname = 'a'\nsecret = 'aaaaaaaaaaaaaaaaaaaa'\n[[token]]\nname = 'a'\n"
         "secret = 'bbbbbbbbbbbbbbbbbbbb'\n", "unique"),
        ("[[token]]\nname = \"a\\u0000\"\nsecret = 'aaaaaaaaaaaaaaaaaaaa'\n", "control characters"),
        ("", "at least one"),
    ])
    def test_bad_token_files_are_refused(self, tmp_path, toml, expected):
        """A token file that cannot mean what it says is refused, naming the file, token and field."""
        path = tmp_path / "t.toml"
        path.write_text(toml)
        with pytest.raises(InvalidInput, match=expected) as refused:
            Tokens.load(path)
        assert str(path) in str(refused.value)


class TestPermissions:
    def test_a_token_may_only_what_it_was_given(self, tmp_path):
        """require refuses a permission the token lacks, naming both."""
        reader = tokens(tmp_path).find(SECRETS["reader"])
        reader.require("read", "get")
        with pytest.raises(Forbidden, match="'reader' may not patch: it needs 'write'"):
            reader.require("write", "patch")

    def test_authors_follow_the_globs(self, tmp_path):
        """An author inside the patterns is granted, one outside refused; none requested is the token's name."""
        writer = tokens(tmp_path).find(SECRETS["writer"])
        assert writer.author(None) == "writer"
        assert writer.author("verse/ops") == "verse/ops"
        with pytest.raises(Forbidden, match="may not write as author 'admin/root'"):
            writer.author("admin/root")
        with pytest.raises(InvalidRequest, match="control characters"):
            writer.author("verse/\n\x00x")

    @given(st.text(min_size=1, max_size=20).filter(lambda text: any(ord(c) < 32 or ord(c) == 127 for c in text)))
    def test_no_author_holds_a_control_character(self, author):
        """check_author refuses every author with a control character in it."""
        with pytest.raises(InvalidRequest, match="control characters"):
            check_author(author)


class TestRefuseOpen:
    def test_an_open_server_stays_on_loopback(self, tmp_path):
        """Without tokens a non-loopback address is refused unless insecure; loopback and tokens pass."""
        with pytest.raises(InvalidInput, match="refusing to serve 0.0.0.0 without tokens"):
            refuse_open(["127.0.0.1", "0.0.0.0"], None, False)
        refuse_open(["0.0.0.0"], None, True)
        refuse_open(["0.0.0.0"], tokens(tmp_path), False)
        refuse_open(["127.0.0.1", "::1", "localhost", None], None, False)
