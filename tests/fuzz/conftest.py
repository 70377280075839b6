"""Fuzz tests: byte-level mutations of the Hive fixture ORC files and of the provider's own
metadata (plan, manifests, index), with a fixed budget (``mutations.PROFILE``), and a guard
that stops a hanging test."""

from __future__ import annotations

import faulthandler
from collections.abc import Iterator

import pytest
from mutations import EXAMPLES, HANG_SECONDS, PROFILE


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A test that hangs is stopped (with every thread's stack on stderr) instead of CI's
    whole job timing out."""
    faulthandler.dump_traceback_later(HANG_SECONDS * max(1, EXAMPLES // 20), exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_report_header(config: pytest.Config) -> str:
    return f"fuzz: hypothesis profile {PROFILE}, {EXAMPLES} examples a test"
