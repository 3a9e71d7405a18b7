"""vLLM's own security flags secure the adapter's NNRP listener on real vLLM CPU (issue 44).

Explicit path: ``vllm-nnrp serve M --api-key K --ssl-certfile C --ssl-keyfile Kf`` listening on
``quic+tls://`` with ``wss://`` beside it (one engine, two TLS carriers), a throwaway CA made
here. The Level 1 recipes pass over each as a provider runs them (the suite's own process,
``--nnrp-tls-ca``, the key from ``NNRP_API_KEY``); a session without the key, or with a wrong
one, is refused; a plaintext client against the TLS endpoint is told so, promptly.
Plugin path: ``vllm serve … --middleware …NnrpServing`` with ``VLLM_API_KEY``: its NNRP listener
refuses a session without the key too, and nothing the adapter logs carries the key.
(Before, vLLM parsed ``--api-key`` on both paths and NNRP served without one.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from probe import LOCAL_BOUND_S, PLUGIN_KEY

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm, run_suite
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess

pytestmark = [pytest.mark.real_vllm, pytest.mark.wire]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "wire"))
from throwaway_tls import Certs, make_certs  # noqa: E402

KEY = PLUGIN_KEY  # the explicit path's too: one key in the whole module


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secure_explicit(vllm_env, certs: Certs,  # type: ignore[no-untyped-def]
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdapterProcess]:
    folder = tmp_path_factory.mktemp("secure-explicit")
    with AdapterProcess(vllm_env["python"], vllm_env["model"], log_path=folder / "adapter.log",
                        listen="quic+tls://127.0.0.1:0",
                        extra_args=["--nnrp-also-listen", "wss://127.0.0.1:0/nnrp",
                                    "--api-key", KEY, "--ssl-certfile", str(certs.cert_pem),
                                    "--ssl-keyfile", str(certs.key_pem)]) as proc:
        yield proc


def chat() -> dict:
    return {"schema_version": contract.SCHEMA_VERSION,
            "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
            "body": {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4,
                     "stream": True, "temperature": 0}}


async def refused_without_key(address: str, **tls: object) -> None:
    """No key: the session opens and every operation ends in invalid_api_key; a wrong key:
    the authentication is refused; the key: the chat streams."""
    with anyio.fail_after(3 * LOCAL_BOUND_S):
        async with await NnrpClient.connect(address, connect_timeout=LOCAL_BOUND_S,
                                            **tls) as client:  # type: ignore[arg-type]
            op = await client.submit(chat(), timeout=LOCAL_BOUND_S)
            [_ async for _ in op]
            assert op.terminal.event["error"]["code"] == contract.ERR_INVALID_API_KEY, op.terminal
        with pytest.raises(NnrpClientError, match="invalid_api_key"):
            await NnrpClient.connect(address, connect_timeout=LOCAL_BOUND_S,
                                     api_key=KEY[::-1], **tls)  # type: ignore[arg-type]
        async with await NnrpClient.connect(address, connect_timeout=LOCAL_BOUND_S,
                                            api_key=KEY, **tls) as client:  # type: ignore[arg-type]
            op = await client.submit(chat(), timeout=LOCAL_BOUND_S * 2)
            [_ async for _ in op]
            assert op.terminal.outcome == contract.TERMINAL_SUCCESS, op.terminal


def test_the_explicit_paths_key_and_certificate_are_in_force(  # type: ignore[no-untyped-def]
        secure_explicit, certs: Certs) -> None:
    info = secure_explicit.info
    assert info["security"] == {"api_key": "required", "tls": str(certs.cert_pem)}
    assert info["address"].startswith("quic+tls://127.0.0.1:")
    assert info["also_address"].startswith("wss://127.0.0.1:")
    anyio.run(lambda: refused_without_key(info["address"], tls_ca=certs.ca_pem))


def test_level1_passes_over_quic_tls_and_wss(secure_explicit, vllm_env, certs: Certs,  # type: ignore[no-untyped-def]
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             record_property) -> None:
    monkeypatch.setenv("NNRP_API_KEY", KEY)  # as a provider passes it: not on a command line
    figures = {}
    for name in ("address", "also_address"):
        address = secure_explicit.info[name]
        out = tmp_path / name
        t0 = time.monotonic()
        rc = run_suite(address, manifest_for_vllm(vllm_env["version"]), out,
                       ["--nnrp-level", "1", "--nnrp-tls-ca", str(certs.ca_pem)])
        results = json.loads((out / "case-results.json").read_text())
        outcomes = [r["outcome"] for r in results["results"]]
        failed = [r for r in results["results"] if r["outcome"] == "failed"]
        assert rc == 0 and not failed, json.dumps(failed, indent=2)[:4000]
        assert outcomes.count("passed") >= 20, outcomes
        # the capability document claims the key and TLS: the security cases ran and passed
        # (docs/pytest-plugin.md#security; quic+tls has no plaintext client to try)
        security = {r["id"]: r["outcome"] for r in results["results"]
                    if r["id"].startswith("security.")}
        plain = "passed" if address.startswith("wss://") else "skipped"
        assert security == {"security.api-key.absent": "passed",
                            "security.api-key.wrong": "passed",
                            "security.api-key.accepted": "passed",
                            "security.tls.plaintext": plain}, security
        assert KEY not in (out / "case-results.json").read_text()
        assert KEY not in (out / "report.html").read_text()
        figures[address.split("://")[0]] = {"passed": outcomes.count("passed"),
                                            "suite_s": round(time.monotonic() - t0, 1)}
    record_property("figures", json.dumps(figures))
    print("security figures:", json.dumps(figures))


def test_a_plaintext_client_is_told_the_endpoint_speaks_tls(  # type: ignore[no-untyped-def]
        secure_explicit, vllm_env, tmp_path: Path) -> None:
    plain = "ws://" + secure_explicit.info["also_address"].split("://", 1)[1]
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", plain, "--manifest",
         str(manifest_for_vllm(vllm_env["version"])), "--results", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    assert done.returncode == 3, done  # the target, not a verdict
    assert "speaks TLS and this client connected in plaintext: use wss://" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < 60, took


def test_the_plugin_paths_key_is_in_force_and_never_logged(plugin_adapter) -> None:  # type: ignore[no-untyped-def]
    """The shared plugin adapter is keyed (conftest): judged here, after the suite runs that
    authenticated on it, whose log lines must not carry the key either."""
    keyed_plugin = plugin_adapter
    info = keyed_plugin.info
    assert info["startup_path"] == "vllm-plugin"
    assert info["security"] == {"api_key": "required", "tls": None}
    anyio.run(lambda: refused_without_key(info["address"]))
    assert keyed_plugin.log_path is not None
    log = keyed_plugin.log_path.read_text(errors="replace")
    assert "API key refused" in log  # our lines are there, and without the key
    assert KEY not in log
