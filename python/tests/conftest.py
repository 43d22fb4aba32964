"""Shared fixtures. Tests that need root, a resolver or the engine say so, and are skipped
outside CI when what they need is missing (in CI, CI=true, they must run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
IN_CI = os.environ.get("CI") == "true"


def need(condition: bool, reason: str) -> None:
    """Skips the test when `condition` is false, except in CI where that is a failure."""
    if not condition:
        if IN_CI:
            pytest.fail(f"CI must be able to run this test: {reason}")
        pytest.skip(reason)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def root() -> None:
    need(os.geteuid() == 0, "needs root")
