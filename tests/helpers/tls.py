"""Self-signed certificates for the TLS tests, made with the ``openssl`` command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["self_signed"]


def self_signed(directory: Path, name: str = "server") -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, written into ``directory``: (cert, key)."""
    openssl = shutil.which("openssl")
    assert openssl is not None, "openssl is needed to make the test certificates"
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key
