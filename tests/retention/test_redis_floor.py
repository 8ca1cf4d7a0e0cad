"""The redis-py the suite runs on: exactly the floor under ``python3 dev.py floor``, else one pyproject.toml admits.

``dev.py floor`` installs the lowest redis-py ``pyproject.toml`` admits into
``.venv-redis-floor/``, puts it first on the path and sets
``RETAIN_EXPECT_REDIS`` to its version: this test makes that run prove which
redis-py it ran the streams, retention and archive tests on.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import redis
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def declared_floor() -> Version:
    """X in pyproject.toml's ``redis[...]>=X``."""
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (requirement,) = [parsed for parsed in map(Requirement, dependencies) if parsed.name == "redis"]
    (floor,) = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    return floor


class TestRedisFloor:
    def test_runs_on_the_expected_redis_py(self):
        """redis-py is exactly RETAIN_EXPECT_REDIS when that is set (dev.py floor), else at least the declared floor."""
        installed = Version(redis.__version__)
        expected = os.environ.get("RETAIN_EXPECT_REDIS")
        if expected:
            assert installed == Version(expected), f"redis-py {installed} from {redis.__file__}, expected {expected}"
        else:
            assert installed >= declared_floor(), f"redis-py {installed} is below the floor pyproject.toml declares"

    def test_the_floor_is_the_declared_one(self):
        """What dev.py floor expects is the floor pyproject.toml declares, so the run tests the floor users get."""
        expected = os.environ.get("RETAIN_EXPECT_REDIS")
        assert expected is None or Version(expected) == declared_floor()
