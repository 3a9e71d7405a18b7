"""TLS over the real wire (NnrpServer and NnrpClient, nnrp-py over loopback) on every carrier
nnrp-py secures: QUIC (``quic+tls://``), WebSocket (``wss://``) and TCP (``tcp+tls://``, ours),
with a throwaway CA. And the failures a client meets, each said in words naming TLS, promptly:
a plaintext client against a TLS endpoint, a certificate from another CA, a wrong name."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.nnrp_server import NnrpServer

pytestmark = [pytest.mark.anyio, pytest.mark.wire]
sys.path.insert(0, str(Path(__file__).parent))
from throwaway_tls import Certs, make_certs  # noqa: E402
from wire_handlers import make_handler  # noqa: E402

#: a refusal must come at once, never by a timeout (the connect timeout is 10 s)
PROMPT_S = 5.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


def chat() -> dict:
    return {"schema_version": contract.SCHEMA_VERSION,
            "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
            "body": {"mode": "echo", "text": "über TLS"}}


@pytest.mark.parametrize("listen", ["quic+tls://127.0.0.1:0", "wss://127.0.0.1:0/nnrp",
                                    "tcp+tls://127.0.0.1:0"])
async def test_a_round_trip_over_each_tls_carrier(certs: Certs, listen: str) -> None:
    scheme = listen.split("://")[0]
    async with NnrpServer(make_handler(), listen, tls=(certs.cert_der, certs.key_der)) as srv:
        assert srv.address.startswith(f"{scheme}://127.0.0.1:")
        async with await NnrpClient.connect(srv.address, tls_ca=certs.ca_pem) as client:
            op = await client.submit(chat(), timeout=10)
            [_ async for _ in op]
            assert op.terminal.event == {"type": contract.EV_COMPLETED,
                                         "body": {"echo": "über TLS"}}


@pytest.mark.parametrize(("listen", "plain", "says"), [
    ("tcp+tls://127.0.0.1:0", "127.0.0.1", "speaks TLS and this client connected in plaintext: "
                                           "use tcp+tls://"),
    ("wss://127.0.0.1:0/nnrp", "ws", "speaks TLS and this client connected in plaintext: "
                                     "use wss://"),
])
async def test_a_plaintext_client_is_told_the_endpoint_speaks_tls(
        certs: Certs, listen: str, plain: str, says: str) -> None:
    async with NnrpServer(make_handler(), listen, tls=(certs.cert_der, certs.key_der)) as srv:
        rest = srv.address.split("://", 1)[1]
        target = rest if plain == "127.0.0.1" else f"{plain}://{rest}"
        started = time.monotonic()
        with pytest.raises(NnrpClientError) as info:
            await NnrpClient.connect(target)
        assert says in str(info.value), info.value
        assert time.monotonic() - started < PROMPT_S


async def test_another_cas_certificate_and_a_wrong_name_fail_naming_tls(
        certs: Certs, tmp_path: Path) -> None:
    other = make_certs(tmp_path, tag="-other")
    async with NnrpServer(make_handler(), "quic+tls://127.0.0.1:0",
                          tls=(certs.cert_der, certs.key_der)) as srv:
        for ca, name in ((other.ca_pem, None), (certs.ca_pem, "not-this-host")):
            started = time.monotonic()
            with pytest.raises(NnrpClientError, match=r"the TLS handshake with 127\.0\.0\.1:"):
                await NnrpClient.connect(srv.address, tls_ca=ca, tls_server_name=name)
            assert time.monotonic() - started < PROMPT_S
        # and the endpoint still serves a client that trusts it
        async with await NnrpClient.connect(srv.address, tls_ca=certs.ca_pem) as client:
            assert (await client.authenticate("k"))["authenticated"] is True


async def test_tls_options_that_cannot_work_are_refused_before_connecting(
        certs: Certs) -> None:
    with pytest.raises(NnrpClientError, match="needs --nnrp-tls-ca FILE"):
        await NnrpClient.connect("quic+tls://127.0.0.1:9")
    with pytest.raises(NnrpClientError, match="a tcp:// target is plaintext"):
        await NnrpClient.connect("127.0.0.1:9", tls_ca=certs.ca_pem)
    with pytest.raises(NnrpClientError, match="over wss:// the name checked is the URL's host"):
        await NnrpClient.connect("wss://127.0.0.1:9/nnrp", tls_ca=certs.ca_pem,
                                 tls_server_name="localhost")
    with pytest.raises(ValueError, match="needs a certificate"):
        NnrpServer(make_handler(), "quic+tls://127.0.0.1:0")
