"""Real servers started as child processes on free loopback ports: for the demo, tests and yours."""

from retain.servers._process import ServerStartError, free_port
from retain.servers.redis import RedisCluster, RedisServer, find_redis_server
from retain.servers.seaweed import SeaweedServer, find_weed

__all__ = ["RedisCluster", "RedisServer", "SeaweedServer", "ServerStartError", "find_redis_server", "find_weed",
           "free_port"]
