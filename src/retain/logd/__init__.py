"""logd: a versioned record store for log-like data, where every write is a commit.

See ``docs/logd.md``. The embedded store::

    from retain.logd import Store
    store = Store.open("logd.sqlite3")
    ops = store.session(author="verse/ops")
    ops.patch([{"set": "jobs.j1", "value": {"status": "done"}}])
"""

from retain.logd.paths import Path, parse
from retain.logd.store import Compaction, Delta, Listing, Read, ScopeInfo, Session, Store, Written

__all__ = ["Compaction", "Delta", "Listing", "Path", "Read", "ScopeInfo", "Session", "Store", "Written", "parse"]
