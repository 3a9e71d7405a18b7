"""The API-key gate over the real wire (NnrpServer and NnrpClient, nnrp-py over loopback):
a session without the key, or with a wrong one, can do nothing; one with the key works; the
key is never in an answer, a log line or the server's stats. And the SDK fact the gate works
around (docs/sdk-defects.md#auth-block), pinned so that a release that fixes it is noticed."""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.nnrp_server import NnrpServer

pytestmark = [pytest.mark.anyio, pytest.mark.wire]
sys.path.insert(0, str(Path(__file__).parent))
from wire_handlers import make_handler  # noqa: E402

KEY = "sekrit-4f1c9a"
OTHER_KEY = "second-key-77"


def chat() -> dict:
    return {"schema_version": contract.SCHEMA_VERSION,
            "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
            "body": {"mode": "echo", "text": "hi"}}


def refused(op_terminal) -> bool:  # type: ignore[no-untyped-def]
    ev = op_terminal.event or {}
    return (op_terminal.delivery == "result_push" and ev.get("type") == contract.EV_ERROR
            and ev["error"]["code"] == contract.ERR_INVALID_API_KEY
            and ev["error"]["type"] == contract.ERR_TYPE_INVALID_REQUEST)


async def test_a_session_without_the_key_can_do_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with NnrpServer(make_handler(), api_keys=[KEY]) as srv, \
            await NnrpClient.connect(srv.address) as client:
        for envelope in (chat(), {"schema_version": contract.SCHEMA_VERSION,
                                  "operation": contract.OP_CAPABILITIES_GET, "body": {}}):
            op = await client.submit(envelope, timeout=10)
            [_ async for _ in op]
            assert refused(op.terminal), op.terminal
            assert contract.OP_SESSION_AUTHENTICATE in op.terminal.event["error"]["message"]
            assert op.terminal.status_code == contract.WIRE_STATUS_ERROR
        assert srv.stats["unauthenticated"] == 2
    assert KEY not in caplog.text


async def test_a_wrong_key_is_refused_and_the_session_stays_locked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with NnrpServer(make_handler(), api_keys=[KEY]) as srv:
        with pytest.raises(NnrpClientError, match="refused the session's API key") as info:
            await NnrpClient.connect(srv.address, api_key="wrong-" + KEY)
        assert "invalid_api_key" in str(info.value) and KEY not in str(info.value)
        async with await NnrpClient.connect(srv.address) as client:
            with pytest.raises(NnrpClientError, match="not valid"):
                await client.authenticate(KEY[:-1])
            op = await client.submit(chat(), timeout=10)
            [_ async for _ in op]
            assert refused(op.terminal)
            # a few wrong tries per session, then no comparison at all, even for the right key
            with pytest.raises(NnrpClientError):
                await client.authenticate("")
            with pytest.raises(NnrpClientError):
                await client.authenticate("x")
            with pytest.raises(NnrpClientError, match="open a new session"):
                await client.authenticate(KEY)
        assert srv.stats["auth_refused"] == 5
    assert KEY not in caplog.text and "wrong-" not in caplog.text


async def test_the_key_opens_the_session_and_every_configured_key_works() -> None:
    async with NnrpServer(make_handler(), api_keys=[KEY, OTHER_KEY]) as srv:
        for key in (KEY, OTHER_KEY):
            async with await NnrpClient.connect(srv.address, api_key=key) as client:
                op = await client.submit(chat(), timeout=10)
                [_ async for _ in op]
                assert op.terminal.event == {"type": contract.EV_COMPLETED,
                                             "body": {"echo": "hi"}}
                assert await client.capabilities() == {"profile": contract.PROFILE}
        assert KEY not in repr(srv.api_gate) and KEY not in repr(srv.stats)


async def test_an_endpoint_without_a_key_says_none_is_required() -> None:
    async with NnrpServer(make_handler()) as srv, await NnrpClient.connect(srv.address) as client:
        answer = await client.authenticate("anything")
        assert answer == {"object": "nnrp.session", "authenticated": True,
                          "api_key_required": False}
        op = await client.submit(chat(), timeout=10)
        [_ async for _ in op]
        assert op.terminal.event["type"] == contract.EV_COMPLETED


def test_native_sdk_still_carries_no_auth_block() -> None:
    """docs/sdk-defects.md#auth-block: nnrp-py's native client has no auth block to send and
    the native server's session policy sees none. When either changes, this fails: move the
    key to NNRP's own CLIENT_HELLO auth block (refused with session.auth_failed)."""
    from nnrp.client import NativeClientOptions, NativeClientSessionOptions
    from nnrp.core import SessionOpenMetadata

    client_fields = {f.name for f in dataclasses.fields(NativeClientSessionOptions)} | {
        f.name for f in dataclasses.fields(NativeClientOptions)}
    assert not any("auth" in name for name in client_fields), client_fields
    policy_sees = {f.name for f in dataclasses.fields(SessionOpenMetadata)}
    assert "auth_bytes" in policy_sees and not any(
        "auth" in name and name != "auth_bytes" for name in policy_sees), policy_sees
