"""Shared by every test file: the tiers' markers and the unit tier's guard (``tiers``), and the fixtures
that many files use.

``python -m pytest -m unit`` runs the unit tier (under a minute); ``-m integration`` and ``-m e2e`` the others.
"""

from __future__ import annotations

from tiers import (  # noqa: F401  (pytest finds its hooks by name here)
    pytest_collection_modifyitems,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
