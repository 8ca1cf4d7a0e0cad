"""Who may do what: tokens, their permissions and the authors they may write as (INV-AUTH).

A token file (TOML) names every token a server accepts::

    [[token]]
    name = "verse-ops"                 # the author of its writes when a request names none
    secret_sha256 = "9f86d08..."       # or: secret = "..." (the hash is kept either way)
    may = ["read", "write", "retain"]  # of read, write, retain, admin (admin: compact, schema, scopes)
    authors = ["verse/*"]              # glob patterns its requests may name as author [its name only]

:meth:`Tokens.find` compares a presented secret's SHA-256 with every token's in constant
time (:func:`hmac.compare_digest`), so neither a match's position nor a near-miss shows in
the time taken. A stream connection presents its token in its first document
(``{auth: {token: SECRET}}``), HTTP in ``Authorization: Bearer SECRET``.

A server with no tokens is open: everything is permitted. :func:`refuse_open` keeps an
open server on loopback unless the operator says ``insecure``; :func:`refuse_clear` keeps a
stream listener that takes tokens in clear on loopback too (a secret would cross the network
unencrypted).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import ipaddress
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retain.errors import Forbidden, InvalidInput, InvalidRequest, Unauthenticated

__all__ = ["PERMISSIONS", "Token", "Tokens", "check_author", "refuse_clear", "refuse_open"]

#: what a token may be granted; ``admin`` covers compact, schema changes and scopes.
PERMISSIONS = ("read", "write", "retain", "admin")
_HEX = frozenset("0123456789abcdef")


def check_author(author: object) -> str:
    """An author as a commit may record it: 1-256 characters, none of them a control character.

    Raises:
        InvalidRequest: naming the author and what was wrong.
    """
    if not isinstance(author, str) or not author or len(author) > 256:
        raise InvalidRequest(f"an author is a string of 1-256 characters (got {author!r})")
    bad = next((char for char in author if ord(char) < 32 or 127 <= ord(char) < 160), None)
    if bad is not None:
        raise InvalidRequest(f"an author holds no control characters (got {author!r}, with {bad!r})")
    return author


@dataclass(frozen=True)
class Token:
    """One token: its name, the SHA-256 of its secret, what it may do and the authors it may write as."""

    name: str
    digest: bytes = field(repr=False)
    may: frozenset[str]
    authors: tuple[str, ...]

    def require(self, permission: str, what: str) -> None:
        """Raises :class:`~retain.errors.Forbidden` unless this token has ``permission`` (for ``what``)."""
        if permission not in self.may:
            raise Forbidden(f"token {self.name!r} may not {what}: it needs {permission!r} "
                            f"(it may {', '.join(sorted(self.may)) or 'nothing'})")

    def author(self, requested: str | None) -> str:
        """The author to write as: ``requested`` when one of the token's patterns admits it, else refused;
        none requested is the token's name.

        Raises:
            Forbidden: ``requested`` lies outside the token's patterns.
        """
        if requested is None:
            return self.name
        check_author(requested)
        if not any(fnmatch.fnmatchcase(requested, pattern) for pattern in self.authors):
            raise Forbidden(f"token {self.name!r} may not write as author {requested!r}: its authors are "
                            f"{list(self.authors)}")
        return requested


class Tokens:
    """The tokens a server accepts; :meth:`find` looks a secret up in constant time."""

    def __init__(self, tokens: Iterable[Token]) -> None:
        self.tokens = tuple(tokens)
        names = [token.name for token in self.tokens]
        if not self.tokens:
            raise InvalidInput("a token file names at least one [[token]]")
        if len(set(names)) != len(names):
            raise InvalidInput(f"token names are unique (got {sorted(names)})")

    def __repr__(self) -> str:
        return f"Tokens({[token.name for token in self.tokens]})"

    @classmethod
    def load(cls, path: str | Path) -> Tokens:
        """Read a token file (TOML).

        Raises:
            InvalidInput: naming the file, the entry and the field that cannot hold.
        """
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise InvalidInput(f"cannot read the token file {path}: {exc.strerror}") from None
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"{path}: not TOML: {exc}") from None
        return cls.parse(document, source=str(path))

    @classmethod
    def parse(cls, document: Mapping[str, Any], source: str = "tokens") -> Tokens:
        """Tokens from a parsed token file: ``{"token": [{name, secret | secret_sha256, may, authors}]}``."""
        unknown = sorted(set(document) - {"token"})
        if unknown:
            raise InvalidInput(f"{source}: unknown table {unknown[0]!r}; a token file holds [[token]] entries")
        entries = document.get("token", [])
        if not isinstance(entries, list):
            raise InvalidInput(f"{source}: expected [[token]] entries")
        try:
            return cls(_token(entry, f"{source}: token #{index + 1}") for index, entry in enumerate(entries))
        except InvalidInput as exc:
            raise InvalidInput(str(exc) if str(exc).startswith(source) else f"{source}: {exc}") from None

    def find(self, secret: object) -> Token | None:
        """The token whose secret this is, or None; every token is compared, in constant time each."""
        if not isinstance(secret, str) or not secret:
            return None
        digest = hashlib.sha256(secret.encode()).digest()
        found = None
        for token in self.tokens:
            if hmac.compare_digest(digest, token.digest):
                found = token
        return found

    def present(self, secret: object) -> Token:
        """The token whose secret this is.

        Raises:
            Unauthenticated: no secret, or none of these tokens has it.
        """
        if secret is None:
            raise Unauthenticated("this server needs a token: send {auth: {token: SECRET}} first on a stream, "
                                  "or Authorization: Bearer SECRET over HTTP")
        token = self.find(secret)
        if token is None:
            raise Unauthenticated("unknown token: no configured token has that secret")
        return token

    def bearer(self, headers: Mapping[str, str]) -> Token:
        """The token of an HTTP request's ``Authorization: Bearer SECRET``.

        Raises:
            Unauthenticated: no such header, another scheme, or an unknown secret.
        """
        value = headers.get("authorization")
        if value is None:
            return self.present(None)
        scheme, _, secret = value.strip().partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthenticated(f"Authorization takes 'Bearer SECRET' (got the scheme {scheme!r})")
        return self.present(secret.strip())


def _token(entry: object, where: str) -> Token:
    if not isinstance(entry, dict):
        raise InvalidInput(f"{where}: a token is a table")
    unknown = sorted(set(entry) - {"name", "secret", "secret_sha256", "may", "authors"})
    if unknown:
        raise InvalidInput(f"{where}: unknown field {unknown[0]!r} (a token has name, secret or secret_sha256, "
                           f"may, authors)")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}: name is a non-empty string (got {name!r})")
    where = f"{where} ({name})"
    try:
        check_author(name)
    except InvalidRequest as exc:
        raise InvalidInput(f"{where}: the name is its default author: {exc}") from None
    digest = _digest(entry, where)
    may = entry.get("may", [])
    if not _strings(may) or not set(may) <= set(PERMISSIONS):
        raise InvalidInput(f"{where}: may is a list of {', '.join(PERMISSIONS)} (got {may!r})")
    authors = entry.get("authors", [name])
    if not _strings(authors) or not authors:
        raise InvalidInput(f"{where}: authors is a non-empty list of glob patterns such as [\"verse/*\"] "
                           f"(got {authors!r})")
    return Token(name, digest, frozenset(may), tuple(authors))


def _digest(entry: dict[str, Any], where: str) -> bytes:
    secret, hashed = entry.get("secret"), entry.get("secret_sha256")
    if (secret is None) == (hashed is None):
        raise InvalidInput(f"{where}: give secret or secret_sha256, exactly one")
    if secret is not None:
        if not isinstance(secret, str) or len(secret) < 16:
            raise InvalidInput(f"{where}: secret is a string of at least 16 characters")
        return hashlib.sha256(secret.encode()).digest()
    if not isinstance(hashed, str) or len(hashed) != 64 or not set(hashed.lower()) <= _HEX:
        raise InvalidInput(f"{where}: secret_sha256 is 64 hex digits (got {hashed!r})")
    return bytes.fromhex(hashed)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def refuse_open(hosts: Sequence[str | None], tokens: Tokens | None, insecure: bool) -> None:
    """Refuse to serve a non-loopback address without tokens, unless ``insecure``; before anything binds.

    Raises:
        InvalidInput: naming the address, and the two ways out.
    """
    if tokens is not None or insecure:
        return
    for host in hosts:
        if host is not None and not _loopback(host):
            raise InvalidInput(f"refusing to serve {host} without tokens: anyone who reaches it could write "
                               f"anything; give --tokens FILE, or --insecure to serve it open")


def refuse_clear(hosts: Sequence[str | None], tokens: Tokens | None, tls: bool, insecure: bool) -> None:
    """Refuse to take tokens in clear on a non-loopback stream listener, unless ``insecure``; before anything
    binds.

    Raises:
        InvalidInput: naming the address, and the two ways out.
    """
    if tokens is None or tls or insecure:
        return
    for host in hosts:
        if host is not None and not _loopback(host):
            raise InvalidInput(f"refusing to take tokens in clear on {host}: every secret would cross the network "
                               f"unencrypted; give --tls-cert FILE --tls-key FILE, or --insecure to serve it in clear")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything
