"""Real servers for the whole suite: see retain.testing for the fixtures."""

from hypothesis import HealthCheck, settings

pytest_plugins = ["retain.testing"]

# Examples run against real servers: no per-example deadline (shared, noisy machines),
# and function-scoped fixtures are deliberate (each example cleans its own keys).
settings.register_profile("retain", deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile("retain")
