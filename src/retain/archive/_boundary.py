"""The archive's boundary: obstore's, delta-rs's and pyarrow's exceptions become retain's, with the cause kept.

Three translations, one per kind of work:

- :func:`translate_errors` around a call to the store (obstore) or to the
  table (delta-rs): a refused signature is ``ArchiveAccessDenied``, a missing
  object ``ArchiveObjectMissing``, a lost commit ``ArchiveConflict``, a store
  that cannot be reached ``ArchiveUnavailable``, a log delta-rs cannot read
  or replay (a commit missing, truncated or garbage; a checkpoint gone or
  damaged) ``ArchiveCorrupt`` (the table names the object:
  :mod:`~retain.archive.log_check`);
- :func:`reading_file` around decoding one data file: whatever pyarrow raises
  about its bytes (a page whose checksum does not match, a footer that is not
  Parquet, a column of another type) is ``ArchiveCorrupt`` naming the object;
  a file that is gone is ``ArchiveObjectMissing`` naming it. New checks of a
  file's integrity raise inside this block and are reported the same way.

A retain error raised inside either block (the store read a file object makes
is translated where it happens) passes through as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import obstore.exceptions
import pyarrow as pa
from deltalake.exceptions import (
    CommitFailedError,
    DeltaError,
    DeltaProtocolError,
    SchemaMismatchError,
    TableNotFoundError,
)

from retain.errors import (
    ArchiveAccessDenied,
    ArchiveConflict,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveObjectExists,
    ArchiveObjectMissing,
    ArchiveUnavailable,
    RetainError,
)

__all__ = ["map_error", "printable", "reading_file", "translate_errors"]

_MESSAGE_LIMIT = 300
#: the colour codes and arrows delta-rs draws its chain of causes with
_DECORATION = re.compile(r"\x1b\[[0-9;]*m|↳")
#: how delta-rs (which raises a plain OSError for every store failure) words a refused request
_REFUSED = ("403 Forbidden", "401 Unauthorized", "lacked the necessary privileges", "status code: 403",
            "status code: 401", "InvalidAccessKeyId", "SignatureDoesNotMatch")
_MISSING = ("404 Not Found", "No such file or directory", "not found")
#: how delta-rs's reader (the Delta kernel) words a log it cannot replay: a commit missing, truncated or not JSON,
#: a checkpoint gone or damaged (measured: each kind of damage, with a middle commit, the newest, a checkpoint and
#: its _last_checkpoint hint)
_LOG_DAMAGE = ("Kernel error", "Invalid Checkpoint", "Json error", "contiguous commit", "Parquet error")
#: ... unless it is the store that failed under the reader
_STORE_TROUBLE = ("ObjectStore", "Generic S3 error", "error sending request", "timed out", "Connection refused")


def printable(text: str) -> str:
    """``text`` with what a terminal or a log line must not get raw (control bytes, a damaged file's garbage)
    escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


#: where obstore's messages start their Rust debug dump (``Debug source: Generic {`` and the error's fields)
_DEBUG_DUMP = "Debug source:"
#: what delta-rs puts before every error of its reader, naming its own layer, not what failed
_KERNEL_PREFIX = re.compile(r"^Kernel error -> ")


def _first_line(exc: BaseException) -> str:
    # obstore's and delta-rs's messages end in a multi-line dump of the request; the first lines say it.
    text = _KERNEL_PREFIX.sub("", str(exc).strip().split(_DEBUG_DUMP, 1)[0].strip())
    lines = [printable(_DECORATION.sub("", line).strip()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    text = " ".join(lines[:3]) if lines else type(exc).__name__
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"


#: where object_store asks for credentials when none are given (the cloud's instance metadata; the AWS SDK under
#: delta-rs calls it IMDS)
_METADATA_ENDPOINT = "169.254.169.254"


def map_error(exc: BaseException, what: str) -> ArchiveError:
    """The retain error that stands for an obstore, delta-rs or store exception raised while doing ``what``."""
    reason = _first_line(exc)
    whole = str(exc)
    if isinstance(exc, CommitFailedError):
        return ArchiveConflict(f"{what}: another writer committed first ({reason})")
    if isinstance(exc, obstore.exceptions.AlreadyExistsError):
        return ArchiveObjectExists(f"{what}: the object already exists ({reason})")
    if isinstance(exc, (FileNotFoundError, TableNotFoundError)):
        return ArchiveObjectMissing(f"{what}: no such object ({reason})")
    if isinstance(exc, (DeltaProtocolError, SchemaMismatchError)):
        return ArchiveCorrupt(f"{what}: the table's log is not what retain writes ({reason})")
    if _METADATA_ENDPOINT in whole or "IMDS" in whole:
        return ArchiveAccessDenied(f"{what}: no S3 credentials were found (AWS_ACCESS_KEY_ID and "
                                   "AWS_SECRET_ACCESS_KEY, or the access_key_id and secret_access_key options), so "
                                   f"the store asked the cloud's metadata endpoint for some, and it refused ({reason})")
    if isinstance(exc, (obstore.exceptions.PermissionDeniedError, obstore.exceptions.UnauthenticatedError)) or \
            any(words in whole for words in _REFUSED):
        return ArchiveAccessDenied(f"{what}: the store refused the credentials ({reason})")
    if isinstance(exc, OSError) and not isinstance(exc, obstore.exceptions.BaseError) and \
            any(words in whole for words in _MISSING):
        return ArchiveObjectMissing(f"{what}: no such object ({reason})")
    if isinstance(exc, (obstore.exceptions.GenericError, obstore.exceptions.JoinError, OSError)):
        return ArchiveUnavailable(f"{what}: the store failed ({reason})")
    if isinstance(exc, DeltaError) and any(words in whole for words in _LOG_DAMAGE):
        if any(words in whole for words in _STORE_TROUBLE):
            return ArchiveUnavailable(f"{what}: the store failed under the table's reader ({reason})")
        return ArchiveCorrupt(f"{what}: the table's log is damaged ({reason})")
    if isinstance(exc, DeltaError):
        return ArchiveError(f"{what}: the table refused it ({reason})")
    return ArchiveError(f"{what}: {reason}")


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Raise obstore's and delta-rs's errors inside the block as retain errors ``from`` the original."""
    try:
        yield
    except RetainError:
        raise  # already translated (several archive errors are OSErrors too)
    except (obstore.exceptions.BaseError, DeltaError, OSError) as exc:
        raise map_error(exc, what) from exc


@contextmanager
def reading_file(name: str) -> Iterator[None]:
    """Report a data file that cannot be decoded as ``ArchiveCorrupt`` naming it (a missing one as missing)."""
    try:
        yield
    except RetainError:
        raise
    except FileNotFoundError as exc:
        raise ArchiveObjectMissing(f"data file {name!r} is not in the store ({_first_line(exc)}); "
                                   "it may have been vacuumed under a reader slower than the vacuum retention") \
            from exc
    except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise ArchiveCorrupt(f"data file {name!r} is damaged or not what retain writes: {_first_line(exc)}") from exc
