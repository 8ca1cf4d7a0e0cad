"""Real servers for the whole suite: see retain.testing for the fixtures."""

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["retain.testing"]

# Examples run against real servers: no per-example deadline (shared, noisy machines),
# and function-scoped fixtures are deliberate (each example cleans its own keys).
settings.register_profile("retain", deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile("retain")


@pytest.fixture
def node_size(redis_conn):
    """Set stream-node-max-entries for new streams (bytes unlimited); restore the defaults after."""
    def set_size(entries: int) -> None:
        redis_conn.config_set("stream-node-max-entries", entries)
        redis_conn.config_set("stream-node-max-bytes", 0)
    yield set_size
    redis_conn.config_set("stream-node-max-entries", 100)
    redis_conn.config_set("stream-node-max-bytes", 4096)
