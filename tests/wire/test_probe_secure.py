"""``vllm-nnrp probe`` against a TLS listener that requires a key, as the container's health
checks run it: with the CA and the key from the environment it reports ready; without the key
it is not ready and says why (the probe must never pass an endpoint it could not use)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nnrp_conformance.options import API_KEY_ENV
from vllm_nnrp_adapter import probe
from vllm_nnrp_adapter.nnrp_server import NnrpServer

pytestmark = [pytest.mark.anyio, pytest.mark.wire]
sys.path.insert(0, str(Path(__file__).parent))
from throwaway_tls import make_certs  # noqa: E402
from wire_handlers import make_handler  # noqa: E402


async def test_the_probe_authenticates_over_tls(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    certs = make_certs(tmp_path)
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    async with NnrpServer(make_handler(), "quic+tls://127.0.0.1:0", api_keys=["k1"],
                          tls=(certs.cert_der, certs.key_der)) as srv:
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
        with pytest.raises(probe.ProbeFailed, match="invalid_api_key"):
            await probe.probe(srv.address, 10, tls_ca=certs.ca_pem)
        monkeypatch.setenv("VLLM_API_KEY", "k1")  # the server's own variable, in its container
        document = await probe.probe(srv.address, 10, tls_ca=certs.ca_pem,
                                     tls_server_name="localhost")
        assert document["profile"]
