"""retain: bound log-like data and keep its history.

Importing retain starts nothing: no thread, no timer, no connection, and loads
only the vocabulary. The verbs and the parts' entry points are here too, each
imported on first use (``from retain import Archive`` loads pyarrow, ``import
retain`` does not)::

    from retain import MaxLen, RetentionDriver, StreamRef, trim
    trim(conn, StreamRef("shop", "orders"), MaxLen(10_000))
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from retain.errors import (
    AuthenticationError,
    InvalidDuration,
    InvalidInput,
    InvalidPolicy,
    InvalidStreamName,
    InvalidWindow,
    RetainError,
    ServerError,
    ServerUnavailable,
    WrongTypeError,
)
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId, Window, minid_floor

if TYPE_CHECKING:  # what __getattr__ gives, for the type checker (``x as x``: ``read`` and ``trim`` are modules too)
    from retain.archive import Archive, fold_then_trim
    from retain.archive.read import read as read
    from retain.logd import Client, Store
    from retain.retention import AsyncRetentionDriver, RetentionDriver, StreamPolicy
    from retain.streams import RawKey, StreamRef
    from retain.streams.trim import atrim
    from retain.streams.trim import trim as trim

__version__ = "0.1.0"

#: the names imported on first use, and the module each comes from
_LAZY = {
    "trim": "retain.streams", "atrim": "retain.streams", "StreamRef": "retain.streams", "RawKey": "retain.streams",
    "RetentionDriver": "retain.retention", "AsyncRetentionDriver": "retain.retention",
    "StreamPolicy": "retain.retention",
    "Archive": "retain.archive", "fold_then_trim": "retain.archive", "read": "retain.archive",
    "Store": "retain.logd", "Client": "retain.logd",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'retain' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next look-up is a plain one
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "Archive",
    "AsyncRetentionDriver",
    "AuthenticationError",
    "Client",
    "InvalidDuration",
    "InvalidInput",
    "InvalidPolicy",
    "InvalidStreamName",
    "InvalidWindow",
    "Limits",
    "MaxAge",
    "MaxBytes",
    "MaxLen",
    "MinId",
    "RawKey",
    "RetainError",
    "RetentionDriver",
    "ServerError",
    "ServerUnavailable",
    "Store",
    "StreamPolicy",
    "StreamRef",
    "Window",
    "WrongTypeError",
    "atrim",
    "fold_then_trim",
    "minid_floor",
    "read",
    "trim",
]
