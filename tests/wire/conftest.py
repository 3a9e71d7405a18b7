"""Fixtures for the wire tests: a real NnrpServer and NnrpClient over loopback."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
