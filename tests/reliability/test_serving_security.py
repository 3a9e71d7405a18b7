"""What both start-up paths share (``serve.nnrp_serving``) does with vLLM's security flags,
over the real wire with the scripted backend: its ``args`` carry what vLLM parsed
(``--api-key``, ``--ssl-certfile``/``--ssl-keyfile``). The real-vLLM test
(tests/real_vllm/test_security_real.py) shows vLLM's parser and app state hand them over."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.launch.security import InsecureListen
from vllm_nnrp_adapter.launch.serve import nnrp_serving
from vllm_nnrp_adapter.launch.settings import ServeConfig

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "wire"))
from throwaway_tls import make_certs  # noqa: E402

from conftest import MANIFEST, ScriptedBackend, chat, envelope  # noqa: E402

KEY = "serving-key-31337"


def backend(**args: object) -> ScriptedBackend:
    b = ScriptedBackend()
    b.args = SimpleNamespace(**{"api_key": None, "ssl_certfile": None, "ssl_keyfile": None, **args})  # type: ignore[attr-defined]
    return b


async def test_vllms_key_binds_the_listener_and_is_never_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    config = ServeConfig(vllm_argv=[], listen="127.0.0.1:0")
    async with nnrp_serving(backend(api_key=[KEY]), config, MANIFEST) as info:
        assert info["security"] == {"api_key": "required", "tls": None}
        async with await NnrpClient.connect(info["address"]) as client:
            op = await client.submit(envelope(chat("short")), timeout=30)
            [_ async for _ in op]
            assert op.terminal.event["error"]["code"] == contract.ERR_INVALID_API_KEY
        with pytest.raises(NnrpClientError, match="not valid"):
            await NnrpClient.connect(info["address"], api_key=KEY + "x")
        async with await NnrpClient.connect(info["address"], api_key=KEY) as client:
            op = await client.submit(envelope(chat("short")), timeout=30)
            [_ async for _ in op]
            assert op.terminal.event["type"] == contract.EV_COMPLETED
    assert KEY not in caplog.text


async def test_vllms_certificate_serves_quic_and_wss(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    config = ServeConfig(vllm_argv=[], listen="quic+tls://127.0.0.1:0",
                         also_listen="wss://127.0.0.1:0/nnrp")
    b = backend(ssl_certfile=str(certs.cert_pem), ssl_keyfile=str(certs.key_pem))
    async with nnrp_serving(b, config, MANIFEST) as info:
        assert info["security"] == {"api_key": "none", "tls": str(certs.cert_pem)}
        for address in (info["address"], info["also_address"]):
            async with await NnrpClient.connect(address, tls_ca=certs.ca_pem) as client:
                op = await client.submit(envelope(chat("short")), timeout=30)
                [_ async for _ in op]
                assert op.terminal.event["type"] == contract.EV_COMPLETED, address


def _loopback_alias() -> str | None:
    """A host name other than ``localhost`` that resolves to loopback addresses only: the safe
    default treats it as reachable from elsewhere (a name may resolve anywhere), while it binds
    loopback (these tests never listen beyond it)."""
    name = socket.gethostname()
    try:
        addresses = {a[4][0] for a in socket.getaddrinfo(name, None)}
    except OSError:
        return None
    import ipaddress

    if name != "localhost" and addresses and all(
            ipaddress.ip_address(a).is_loopback for a in addresses):
        return name
    return None


async def test_allow_insecure_serves_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    alias = _loopback_alias()
    if alias is None:
        pytest.skip("this host's name does not resolve to loopback only")
    listen = f"{alias}:0"
    with pytest.raises(InsecureListen, match="--nnrp-allow-insecure"):
        async with nnrp_serving(backend(), ServeConfig(vllm_argv=[], listen=listen), MANIFEST):
            pass
    caplog.set_level(logging.WARNING, logger="vllm_nnrp_adapter")
    config = ServeConfig(vllm_argv=[], listen=listen, allow_insecure=True)
    async with nnrp_serving(backend(), config, MANIFEST) as info, \
            await NnrpClient.connect(info["address"]) as client:
        assert (await client.capabilities())["profile"] == contract.PROFILE
    warnings = [r for r in caplog.records if "--nnrp-allow-insecure" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
