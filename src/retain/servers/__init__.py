"""Real servers started as child processes on free loopback ports: for the demo, tests and yours.

Each one (:class:`RedisServer`, :class:`ValkeyServer`, :class:`RedisCluster`,
:class:`SeaweedServer`, :class:`PostgresServer`) shares one
lifecycle (:mod:`retain.servers._process`, internal): a directory of its own, a free
loopback port (never a machine's standard one), started on enter, stopped and removed on
exit, also when a start fails.

Imports: the vocabulary; :mod:`retain.archive` only to open an archive on a running
SeaweedFS (:meth:`SeaweedServer.archive`), lazily, so that importing the servers loads no
pyarrow. Nothing below :mod:`retain.cli` and :mod:`retain.demo` imports it but tests.
"""

from retain.errors import ServerStartError
from retain.servers._process import free_port
from retain.servers.postgres import PostgresServer, find_postgres_bin
from retain.servers.redis import (
                                  RedisCluster,
                                  RedisServer,
                                  SentinelServer,
                                  ValkeyServer,
                                  find_redis_server,
                                  find_valkey_server,
)
from retain.servers.seaweed import SeaweedServer, find_weed

__all__ = ["PostgresServer", "RedisCluster", "RedisServer", "SeaweedServer", "SentinelServer", "ServerStartError",
           "ValkeyServer", "find_postgres_bin", "find_redis_server", "find_valkey_server", "find_weed", "free_port"]
