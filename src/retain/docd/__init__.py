"""docd: a router in front of logd and of controllers mounted at paths.

See ``docs/docd.md``. docd speaks logd's request language (:mod:`retain.wire`); each
request goes to the owner of its path -- logd for a base path, the controller whose
mount holds it otherwise -- and a retain request is split by owner, sent to every owner at once with one
``now``, and answered rule by rule in the order sent::

    from retain.docd import DocdServer, ThreadedServer, load_mounts
    with ThreadedServer(DocdServer(load_mounts("mounts.toml"), listen=("127.0.0.1", 7410))):
        ...

The routing itself is pure: :func:`route` plans, :func:`answer_retain` answers.
:func:`serve` runs docd as ``retain docd serve`` does, from a :class:`DocdConfig`
(its endpoints included).

docd imports the vocabulary (:mod:`retain.errors`, :mod:`retain.clock`, :mod:`retain._fields`,
:mod:`retain._toml`), :mod:`retain.wire` (documents, the stream server and its connection loop,
running a server), :mod:`retain.ops` for its endpoints, and the public names of logd it needs -- paths, the retain request's parser,
the client, and for the controller kit the store and its verb table -- never logd's server.
Only the CLI and the demo import docd.
"""

from retain.docd.controller import UNSUPPORTED, Controller, controller_verbs
from retain.docd.daemon import DocdConfig, serve
from retain.docd.mounts import LOGD, Mount, MountTable, load_mounts, parse_mounts
from retain.docd.owners import Owners, fan_out
from retain.docd.render import render_answer
from retain.docd.router import (
                                Fanout,
                                Forward,
                                Owner,
                                OwnerRequest,
                                RuleRoute,
                                SessionChange,
                                answer_forward,
                                answer_retain,
                                delta_from,
                                route,
)
from retain.docd.server import DocdServer
from retain.wire import ThreadedServer

__all__ = [
    "LOGD",
    "UNSUPPORTED",
    "Controller",
    "DocdConfig",
    "DocdServer",
    "Fanout",
    "Forward",
    "Mount",
    "MountTable",
    "Owner",
    "OwnerRequest",
    "Owners",
    "RuleRoute",
    "SessionChange",
    "ThreadedServer",
    "answer_forward",
    "answer_retain",
    "controller_verbs",
    "delta_from",
    "fan_out",
    "load_mounts",
    "parse_mounts",
    "render_answer",
    "route",
    "serve",
]
