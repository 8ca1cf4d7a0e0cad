"""Real servers started as child processes on free loopback ports: for the demo, tests and yours."""

from retain.servers._process import ServerStartError, free_port
from retain.servers.redis import RedisCluster, RedisServer, find_redis_server

__all__ = ["RedisCluster", "RedisServer", "ServerStartError", "find_redis_server", "free_port"]
