"""Plain helpers that tests import (fixtures stay in each folder's conftest.py)."""
