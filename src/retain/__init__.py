"""retain: bound log-like data and keep its history.

Importing retain starts nothing: no thread, no timer, no connection.
"""

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

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
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
    "RetainError",
    "ServerError",
    "ServerUnavailable",
    "Window",
    "WrongTypeError",
    "minid_floor",
]
