"""wire: how logd and docd talk -- the request language's documents, their framing and bounds, the servers.

One layer under both servers, so that neither holds the other's transport:

- documents: YAML (or JSON) with the registered tags (:mod:`~retain.wire.tags`), loaded
  safely (:mod:`~retain.wire.loader`), in seed 004's braced shape too
  (:mod:`~retain.wire.braced`), written by :mod:`~retain.wire.dumpers`
  (:func:`load`, :func:`dump`, :func:`dump_braced`);
- bounds (:class:`Limits`, :class:`TooLarge`) and framing on a stream (:func:`frame`,
  :class:`Framer`, :data:`END`);
- the request and answer shapes, and the one way a failure becomes an answer
  (:func:`parse_request`, :func:`answer_result`, :func:`answer_error`, :func:`answer_failure`);
- who may do what: :class:`Tokens` (a token file), each :class:`Token`'s permissions and author
  patterns, :func:`check_author`, :func:`refuse_open` (no open server off loopback),
  :func:`refuse_clear` (no token in clear off loopback); TLS contexts (:func:`server_context`,
  :func:`client_context`);
- serving: listening sockets (:class:`StreamSockets`), the one connection loop
  (:func:`serve_connection`: documents in, answers out in request order, each
  :class:`Conversation` deciding whether it pipelines), a :class:`StreamServer` of
  conversations, the HTTP transport (:func:`http_app`, :class:`HttpServer`), and running
  any of them on a loop in a thread (:class:`ThreadedServer`); both transports load big
  documents and dump big answers off the loop (:mod:`~retain.wire.offload`).

It imports only the vocabulary (:mod:`retain.errors`, :mod:`retain.clock`,
:mod:`retain._fields`) and never logd or docd: they import it. The modules are this
package's layout; what others use is exported here.
"""

from retain.wire.auth import PERMISSIONS, Token, Tokens, check_author, refuse_clear, refuse_open
from retain.wire.bounds import ByteBudget, Limits, StreamTimeouts, TooLarge, refuse_size
from retain.wire.connection import Conversation, Link, Reply, serve_connection
from retain.wire.documents import Format, answer_format, dump, dump_braced, load, receive, split_documents
from retain.wire.dumpers import FlowDumper, represent_str
from retain.wire.framing import END, Framer, frame
from retain.wire.http import HTTP_STATUS, HttpHandler, HttpServer, HttpTimeouts, http_app
from retain.wire.requests import answer_error, answer_failure, answer_result, parse_request
from retain.wire.running import Server, ThreadedServer
from retain.wire.serving import StreamServer
from retain.wire.sockets import DEFAULT_SOCKET_MODE, HostPort, StreamSockets, bind_unix_socket
from retain.wire.tags import TAG_NAMES, AutoId, LogdKey, Or, Raw, from_plain, to_plain
from retain.wire.tls import ClientTls, client_context, server_context

__all__ = [
    "ByteBudget",
    "StreamTimeouts",
    "DEFAULT_SOCKET_MODE",
    "END",
    "PERMISSIONS",
    "Token",
    "Tokens",
    "HttpTimeouts",
    "bind_unix_socket",
    "check_author",
    "refuse_clear",
    "refuse_open",
    "ClientTls",
    "client_context",
    "server_context",
    "HTTP_STATUS",
    "TAG_NAMES",
    "AutoId",
    "Conversation",
    "FlowDumper",
    "Format",
    "Framer",
    "HostPort",
    "HttpHandler",
    "HttpServer",
    "Limits",
    "Link",
    "LogdKey",
    "Or",
    "Raw",
    "Reply",
    "Server",
    "StreamServer",
    "StreamSockets",
    "ThreadedServer",
    "TooLarge",
    "answer_error",
    "answer_failure",
    "answer_format",
    "answer_result",
    "dump",
    "dump_braced",
    "frame",
    "from_plain",
    "http_app",
    "load",
    "parse_request",
    "receive",
    "refuse_size",
    "represent_str",
    "serve_connection",
    "split_documents",
    "to_plain",
]
