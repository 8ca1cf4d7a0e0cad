"""Content checksums: every stored value and delta carries the CRC-32 of its encoded bytes, written with it.

A database checks its own pages (SQLite's integrity check, PostgreSQL's page checksums where enabled), not what a
page holds: a byte changed inside a value, its length kept, was served as written. So each
record version's ``value`` is stored beside ``crc`` and each commit's ``ops`` beside ``ops_crc``, both the
:func:`checksum` of the text's UTF-8 bytes; every read of a value or a delta compares them
(:func:`verify`), as does ``retain logd check``, and a mismatch is :class:`~retain.errors.StoreDamaged` naming the
record (its path and commit) or the commit.

CRC-32 (``zlib.crc32``): in the standard library, implemented in C and some GB/s, so that a write or a read pays
well under a microsecond per record for a typical value; it finds every change of one to four bytes and every
burst of up to 32 bits. It guards against damage, not against an attacker who can write the database (who can
write the checksum too): that is what the database's own access control is for.
"""

from __future__ import annotations

import zlib

from retain.errors import StoreDamaged
from retain.logd.storage import SEP

__all__ = ["checksum", "checksum_bytes", "decoded", "decoded_delta", "delta_damaged", "record_name", "value_damaged",
           "verify", "verify_delta"]


def checksum(text: str | None) -> int | None:
    """The CRC-32 of ``text``'s UTF-8 bytes, as stored beside it; None for no text (a tombstone, a keyed array)."""
    return None if text is None else zlib.crc32(text.encode())


def checksum_bytes(data: bytes | None) -> int | None:
    """The CRC-32 of a stored text's bytes as they lie in the store (what SQLite hands a read of ``CAST(value AS
    BLOB)``): a changed byte that is no longer UTF-8 is compared too, never refused by a decoder first."""
    return None if data is None else zlib.crc32(data)


def record_name(key: str) -> str:
    """A record's path as messages show it (``jobs.j1``), from its stored key."""
    return key.replace(SEP, ".").lstrip(".") or "the root"


def value_damaged(key: str, rev: int, stored: int | None, found: int | None) -> StoreDamaged:
    """The error of a record version whose value does not match its checksum."""
    return StoreDamaged(f"the value of record {record_name(key)} (key {key!r}) at commit {rev} does not match its "
                        f"checksum (stored {_shown(stored)}, computed {_shown(found)}): the store is damaged")


def delta_damaged(number: int, stored: int | None, found: int | None) -> StoreDamaged:
    """The error of a commit whose delta does not match its checksum."""
    return StoreDamaged(f"the delta of commit {number} does not match its checksum (stored {_shown(stored)}, "
                        f"computed {_shown(found)}): the store is damaged")


def verify(key: str, rev: int, value: str | None, stored: int | None) -> None:
    """Check a record version's value against the checksum stored with it.

    Raises:
        StoreDamaged: they differ (a value with no checksum, or a checksum with no value, differ too); names the
            record and the commit.
    """
    if value is None and stored is None:
        return
    found = checksum(value)
    if found != stored:
        raise value_damaged(key, rev, stored, found)


def decoded(key: str, rev: int, data: bytes | None, stored: int | None) -> str | None:
    """A record version's value from its stored bytes, checked against the checksum stored with it.

    Raises:
        StoreDamaged: they differ, or the bytes are no UTF-8; names the record and the commit.
    """
    if data is None and stored is None:
        return None
    found = checksum_bytes(data)
    if found != stored or data is None:
        raise value_damaged(key, rev, stored, found)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:  # written so (its checksum matches), not changed since
        raise StoreDamaged(f"the value of record {record_name(key)} (key {key!r}) at commit {rev} is no UTF-8 "
                           f"({exc}): the store is damaged") from exc


def decoded_delta(number: int, data: bytes | None, stored: int | None) -> str | None:
    """A commit's delta from its stored bytes, checked against the checksum stored with it.

    Raises:
        StoreDamaged: they differ, or the bytes are no UTF-8; names the commit.
    """
    if data is None and stored is None:
        return None
    found = checksum_bytes(data)
    if found != stored or data is None:
        raise delta_damaged(number, stored, found)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise StoreDamaged(f"the delta of commit {number} is no UTF-8 ({exc}): the store is damaged") from exc


def verify_delta(number: int, ops: str | None, stored: int | None) -> None:
    """Check a commit's delta against the checksum stored with it (a delta compaction dropped has neither).

    Raises:
        StoreDamaged: they differ; names the commit.
    """
    if ops is None and stored is None:
        return
    found = checksum(ops)
    if found != stored:
        raise delta_damaged(number, stored, found)


def _shown(crc: int | None) -> str:
    return "none" if crc is None else f"{crc:08x}"
