"""logd: a versioned record store for log-like data, where every write is a commit."""

from retain.logd.paths import Path, parse

__all__ = ["Path", "parse"]
