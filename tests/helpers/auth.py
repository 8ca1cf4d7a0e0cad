"""Token files for the auth tests: secrets, and the TOML that names them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from retain.wire import Tokens

#: name -> secret of every token :func:`token_file` writes.
SECRETS = {"reader": "reader-secret-0123456789", "writer": "writer-secret-0123456789",
           "admin": "admin-secret-012345678901", "docd": "docd-secret-0123456789ab"}

TOKENS_TOML = f"""
[[token]]
name = "reader"
secret = "{SECRETS['reader']}"
may = ["read"]

[[token]]
name = "writer"
secret_sha256 = "{hashlib.sha256(SECRETS['writer'].encode()).hexdigest()}"
may = ["read", "write", "retain"]
authors = ["verse/*", "writer"]

[[token]]
name = "admin"
secret = "{SECRETS['admin']}"
may = ["read", "write", "retain", "admin"]
authors = ["*"]

[[token]]
name = "docd"
secret = "{SECRETS['docd']}"
may = ["read", "write", "retain"]
authors = ["*"]
"""


def token_file(directory: Path) -> Path:
    """Write :data:`TOKENS_TOML` into ``directory``; its path."""
    path = directory / "tokens.toml"
    path.write_text(TOKENS_TOML)
    return path


def tokens(directory: Path) -> Tokens:
    return Tokens.load(token_file(directory))
