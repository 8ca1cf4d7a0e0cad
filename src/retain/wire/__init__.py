"""wire: how logd and docd talk -- the request language's documents, their framing and bounds, the servers.

One layer under both servers, so that neither holds the other's transport. What a user of
logd or docd meets is exported here:

- documents: YAML (or JSON) with the registered tags (:class:`Or`, :class:`LogdKey`,
  :class:`AutoId`, :class:`Raw`), loaded safely and written (:func:`load`, :func:`dump`,
  :func:`dump_braced`, :func:`split_documents`);
- bounds: :class:`WireLimits` (one document, one connection), :class:`StreamTimeouts`,
  :class:`HttpTimeouts`, :class:`ByteBudget` (what all connections may hold);
- who may do what: :class:`Tokens` (a token file), each :class:`Token`'s permissions and author
  patterns, :func:`check_author`, :func:`refuse_open` (no open server off loopback),
  :func:`refuse_clear` (no token in clear off loopback); TLS contexts (:func:`server_context`,
  :func:`client_context`, :class:`ClientTls`);
- running a server on a loop in a thread (:class:`ThreadedServer`).

The machinery is private to the servers that use it, imported from its module:
framing (:mod:`~retain.wire.framing`), the request and answer shapes
(:mod:`~retain.wire.requests`), the one connection loop (:mod:`~retain.wire.connection`),
the stream and HTTP servers (:mod:`~retain.wire.serving`, :mod:`~retain.wire.http`,
:mod:`~retain.wire.sockets`), the pool that loads big documents and dumps big answers
off the loop (:mod:`~retain.wire.offload`).

It imports only the vocabulary (:mod:`retain.errors`, :mod:`retain.clock`,
:mod:`retain._fields`) and never logd or docd: they import it.
"""

from retain.wire.auth import PERMISSIONS, Token, Tokens, check_author, refuse_clear, refuse_open
from retain.wire.bounds import ByteBudget, StreamTimeouts, WireLimits
from retain.wire.documents import Format, dump, dump_braced, load, split_documents
from retain.wire.http import HttpTimeouts
from retain.wire.running import Server, ThreadedServer
from retain.wire.tags import TAG_NAMES, AutoId, LogdKey, Or, Raw
from retain.wire.tls import ClientTls, client_context, server_context

__all__ = [
    "AutoId",
    "ByteBudget",
    "ClientTls",
    "Format",
    "HttpTimeouts",
    "LogdKey",
    "Or",
    "PERMISSIONS",
    "Raw",
    "Server",
    "StreamTimeouts",
    "TAG_NAMES",
    "ThreadedServer",
    "Token",
    "Tokens",
    "WireLimits",
    "check_author",
    "client_context",
    "dump",
    "dump_braced",
    "load",
    "refuse_clear",
    "refuse_open",
    "server_context",
    "split_documents",
]
