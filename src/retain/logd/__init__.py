"""logd: a versioned record store for log-like data, where every write is a commit.

See ``docs/logd.md``. The embedded store::

    from retain.logd import Store
    store = Store.open("logd.sqlite3")
    ops = store.session(author="verse/ops")
    ops.patch([{"set": "jobs.j1", "value": {"status": "done"}}])

Retention is a request: :func:`run_retain` ages records out as ordinary,
precondition-guarded delete commits. :func:`backup` copies a SQLite store at one commit while it
serves; :func:`restore` puts a copy back.

Served (``retain logd serve``) it speaks YAML or JSON documents over a stream socket
and HTTP (:func:`serve` of a :class:`ServeConfig` is that command in a program of your own);
:class:`Client` and :class:`AsyncClient` talk to it. :func:`run_scheduled`
is ``retain logd schedule`` from a :class:`ScheduleConfig`: a retain request sent on a beat.

logd imports the vocabulary (:mod:`retain.errors`, :mod:`retain.clock`, :mod:`retain._fields`)
and :mod:`retain.wire` (and :mod:`retain.ops`, for its daemons' endpoints alone) -- the documents, their tags (re-exported here: :class:`Or`,
:class:`LogdKey`, :class:`AutoId`, :class:`Raw`), the stream and HTTP servers -- and never
docd, streams or archive.
"""

from retain.logd.backup import Backup, Restore, backup, restore
from retain.logd.client import AsyncClient, Client
from retain.logd.paths import Path, parse
from retain.logd.postgres import PostgresBackend
from retain.logd.retain import RetainResult, RuleResult, run_retain
from retain.logd.retain_rules import RetainRequest, RetainRule, Selection, parse_retain, select
from retain.logd.schedule_daemon import ScheduleConfig, run_scheduled, send_once
from retain.logd.schema import Schema
from retain.logd.serve_daemon import ServeConfig, serve
from retain.logd.server import LogdServer, ServerThread
from retain.logd.settings import Settings, Tier
from retain.logd.sqlite import SqliteBackend
from retain.logd.storage import Backend
from retain.logd.store import Compaction, Delta, Listing, Read, ScopeInfo, Session, Store, Written
from retain.wire import AutoId, LogdKey, Or, Raw

__all__ = [
    "AsyncClient",
    "AutoId",
    "Backend",
    "Backup",
    "Client",
    "Compaction",
    "Delta",
    "Listing",
    "LogdKey",
    "LogdServer",
    "Or",
    "Path",
    "PostgresBackend",
    "Raw",
    "Read",
    "Restore",
    "RetainRequest",
    "RetainResult",
    "RetainRule",
    "RuleResult",
    "ScheduleConfig",
    "Schema",
    "ScopeInfo",
    "ServeConfig",
    "Selection",
    "ServerThread",
    "Session",
    "Settings",
    "SqliteBackend",
    "Store",
    "Tier",
    "Written",
    "backup",
    "parse",
    "parse_retain",
    "restore",
    "run_retain",
    "run_scheduled",
    "select",
    "send_once",
    "serve",
]
