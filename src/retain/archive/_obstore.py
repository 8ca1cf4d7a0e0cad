"""The boundary with obstore: its exceptions become retain's, with the cause kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import obstore.exceptions

from retain.errors import (
    ArchiveAccessDenied,
    ArchiveError,
    ArchiveObjectExists,
    ArchiveObjectMissing,
    ArchiveUnavailable,
    RetainError,
)

__all__ = ["map_error", "translate_errors"]

_MESSAGE_LIMIT = 300


def _first_line(exc: BaseException) -> str:
    # obstore messages end in a multi-line debug dump of the request; the first line says it.
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"


def map_error(exc: BaseException, what: str) -> ArchiveError:
    """The retain error that stands for an obstore exception raised while doing ``what``."""
    reason = _first_line(exc)
    if isinstance(exc, obstore.exceptions.AlreadyExistsError):
        return ArchiveObjectExists(f"{what}: the object already exists ({reason})")
    if isinstance(exc, FileNotFoundError):
        return ArchiveObjectMissing(f"{what}: no such object ({reason})")
    # Some S3 calls (a listing) report a refused signature only as a generic error with its status.
    refused = isinstance(exc, obstore.exceptions.GenericError) and any(
        f"status code: {status}" in reason for status in (401, 403))
    if refused or isinstance(exc, (obstore.exceptions.PermissionDeniedError,
                                   obstore.exceptions.UnauthenticatedError)):
        return ArchiveAccessDenied(f"{what}: the store refused the credentials ({reason})")
    if isinstance(exc, (obstore.exceptions.GenericError, obstore.exceptions.JoinError, OSError)):
        return ArchiveUnavailable(f"{what}: the store failed ({reason})")
    return ArchiveError(f"{what}: {reason}")


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Raise obstore errors inside the block as retain errors ``from`` the original."""
    try:
        yield
    except RetainError:
        raise  # already translated (several archive errors are OSErrors too)
    except (obstore.exceptions.BaseError, OSError) as exc:
        raise map_error(exc, what) from exc
