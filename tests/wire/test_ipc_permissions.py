"""An ipc listener is owner-only (issue 44): its socket is created 0600, so another local user
cannot connect, and the process's umask is left as it was."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from nnrp_conformance.client import NnrpClient
from vllm_nnrp_adapter.nnrp_server import NnrpServer

pytestmark = [pytest.mark.anyio, pytest.mark.wire]
sys.path.insert(0, str(Path(__file__).parent))
from wire_handlers import make_handler  # noqa: E402


async def test_the_ipc_socket_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "nnrp.sock"
    before = os.umask(0o022)
    try:
        async with NnrpServer(make_handler(), f"ipc://{path}"):
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode == 0o600, oct(mode)
            assert os.umask(0o022) == 0o022  # put back
            async with await NnrpClient.connect(f"ipc://{path}") as client:  # the owner can
                assert (await client.authenticate("x"))["api_key_required"] is False
    finally:
        os.umask(before)
