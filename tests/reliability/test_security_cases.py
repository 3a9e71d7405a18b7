"""The suite's security cases (suite/nnrp_conformance/security.py) against the adapter's serving
code over the real wire (loopback, scripted backend), through the CLI as a user runs it: the
capability document claims what the deployment requires, the suite tests the claim.

* an adapter with vLLM's key: the three key cases pass, strict;
* an endpoint that claims a key and serves without one (the adapter's gate removed: the removal
  check of the gate as the suite sees it): non-strict, and the strict run fails on
  security.key-required and security.wrong-key-refused;
* the pytest face fails the strict run naming the rule;
* a ``wss://`` or ``tcp+tls://`` adapter: a ``ws://`` / ``tcp://`` client is refused within the
  connect timeout, in words naming TLS (``security.tls.plaintext`` passes).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from vllm_nnrp_adapter.adapter.adapter import VllmNnrpAdapter
from vllm_nnrp_adapter.launch.serve import nnrp_serving
from vllm_nnrp_adapter.launch.settings import ServeConfig
from vllm_nnrp_adapter.nnrp_server import NnrpServer

pytestmark = [pytest.mark.anyio, pytest.mark.wire]
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "wire"))
from throwaway_tls import make_certs  # noqa: E402

from conftest import MANIFEST, MODEL, REPO, ScriptedBackend  # noqa: E402

KEY = "security-cases-key-5150"
#: the adapter's manifest at Level 1 (the scripted backend serves chat only)
LEVEL1 = {**MANIFEST, "compatibility_levels": [1], "extensions": [],
          "operations": [op for op in MANIFEST["operations"]
                         if op["name"] == "chat.completions.create"]}
#: one recipe (the discovery one, which fetches the claim) keeps the run short
DISCOVERY = REPO / "recipes" / "level1" / "capabilities-document.yaml"
KEY_CASES = ("security.api-key.absent", "security.api-key.wrong", "security.api-key.accepted")


def backend(**args: object) -> ScriptedBackend:
    b = ScriptedBackend([MODEL])
    b.args = SimpleNamespace(**{"api_key": None, "ssl_certfile": None, "ssl_keyfile": None,  # type: ignore[attr-defined]
                                **args})
    return b


async def run_suite(tmp: Path, address: str, *extra: str, key: str | None = KEY
                    ) -> tuple[int, dict[str, dict[str, Any]], str]:
    """``nnrp-conformance run`` against ``address`` (the key from NNRP_API_KEY): its exit code,
    its results by case id, its output."""
    env = {k: v for k, v in os.environ.items() if k != "NNRP_API_KEY"}
    if key is not None:
        env["NNRP_API_KEY"] = key
    manifest = tmp / "manifest.json"
    manifest.write_text(json.dumps(LEVEL1), encoding="utf-8")
    cmd = [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", address,
           "--manifest", str(manifest), "--recipes", str(DISCOVERY),
           "--results", str(tmp / "r.json"), *extra]
    with anyio.fail_after(240):
        proc = await anyio.run_process(cmd, cwd=tmp, env=env, check=False,
                                       stdin=None)
    out = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    assert "Traceback" not in out, out
    results = {r["id"]: r for r in json.loads((tmp / "r.json").read_text())["results"]}
    return proc.returncode, results, out


def verdict(result: dict[str, Any]) -> str:
    return str(result["diagnostics"]["verdict"])


@contextlib.asynccontextmanager
async def claims_a_key_serves_anyone() -> AsyncIterator[str]:
    """The adapter's document claims the key, its server has no gate."""
    adapter = VllmNnrpAdapter(backend(), LEVEL1,
                              security={"api_key": "nnrp.session.authenticate"})
    async with NnrpServer(adapter.handle, "127.0.0.1:0") as server:
        yield server.address


async def test_an_adapter_with_vllms_key_passes_the_key_cases_strict(tmp_path: Path) -> None:
    config = ServeConfig(vllm_argv=[], listen="127.0.0.1:0")
    async with nnrp_serving(backend(api_key=[KEY]), config, LEVEL1) as info:
        code, results, out = await run_suite(tmp_path, info["address"], "--strict")
    assert code == 0, out
    for case in KEY_CASES:
        assert verdict(results[case]) == "passed", results[case]
    evidence = {c: results[c]["diagnostics"]["security"] for c in KEY_CASES}
    assert "invalid_api_key" in evidence["security.api-key.absent"]["seen"], evidence
    assert evidence["security.api-key.wrong"]["opened"] is False, evidence
    assert "ended in success" in evidence["security.api-key.accepted"]["seen"], evidence
    plain = results["security.tls.plaintext"]
    assert plain["outcome"] == "skipped" and "not a TLS target" in plain["message"], plain
    assert KEY not in (tmp_path / "r.json").read_text() and KEY not in out


async def test_an_endpoint_that_claims_a_key_and_serves_anyone_fails_strict(
        tmp_path: Path) -> None:
    async with claims_a_key_serves_anyone() as address:
        (tmp_path / "lenient").mkdir()
        code, results, out = await run_suite(tmp_path / "lenient", address)
        assert code == 0, out  # recommendations: shown, not failed
        assert verdict(results["security.api-key.absent"]) == "non-strict"
        (tmp_path / "strict").mkdir()
        code, results, out = await run_suite(tmp_path / "strict", address, "--strict")
    assert code != 0, out
    failed = {c: [f["rule"] for f in results[c]["diagnostics"]["findings"]]
              for c in KEY_CASES if results[c]["outcome"] == "failed"}
    assert failed == {"security.api-key.absent": ["security.key-required"],
                      "security.api-key.wrong": ["security.wrong-key-refused"]}, failed
    finding = results["security.api-key.absent"]["diagnostics"]["findings"][0]
    assert finding["expected"].startswith("the session's open refused"), finding
    assert "ended in success" in finding["seen"], finding
    assert results["level1.capabilities.document"]["outcome"] == "passed"


async def test_a_run_without_the_key_lists_the_key_cases_with_the_reason(
        tmp_path: Path) -> None:
    async with claims_a_key_serves_anyone() as address:
        code, results, out = await run_suite(tmp_path, address, key=None)
    assert code == 0, out
    for case in KEY_CASES:
        assert results[case]["outcome"] == "skipped", results[case]
        assert "--nnrp-api-key" in results[case]["message"], results[case]


@pytest.mark.parametrize(("listen", "plain"), [("wss://127.0.0.1:0/nnrp", "ws://127.0.0.1:"),
                                               ("tcp+tls://127.0.0.1:0", "127.0.0.1:")])
async def test_a_plaintext_client_against_the_tls_target_is_refused_naming_tls(
        tmp_path: Path, listen: str, plain: str) -> None:
    certs = make_certs(tmp_path)
    config = ServeConfig(vllm_argv=[], listen=listen)
    files = {"ssl_certfile": str(certs.cert_pem), "ssl_keyfile": str(certs.key_pem)}
    async with nnrp_serving(backend(api_key=[KEY], **files), config, LEVEL1) as info:
        code, results, out = await run_suite(tmp_path, info["address"], "--strict",
                                             "--tls-ca", str(certs.ca_pem))
    assert code == 0, out
    for case in (*KEY_CASES, "security.tls.plaintext"):
        assert verdict(results[case]) == "passed", results[case]
    evidence = results["security.tls.plaintext"]["diagnostics"]["security"]
    assert evidence["target"].startswith(plain), evidence
    assert evidence["opened"] is False and evidence["open_s"] < 5, evidence
    assert "speaks TLS" in evidence["seen"], evidence


async def test_the_pytest_face_fails_the_strict_run_naming_the_rule(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(LEVEL1), encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if k != "NNRP_API_KEY"}, "NNRP_API_KEY": KEY}
    async with claims_a_key_serves_anyone() as address:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:hypothesispytest", "-p",
               "no:cacheprovider", "--nnrp-target", address, "--manifest", str(manifest),
               "--recipes", str(DISCOVERY), "--nnrp-strict"]
        with anyio.fail_after(240):
            proc = await anyio.run_process(cmd, cwd=tmp_path, env=env, check=False)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 1, out
    assert "2 failed, 2 passed, 1 skipped" in out, out[-3000:]
    assert "security.api-key.absent" in out and "[security.key-required]" in out, out[-3000:]
    assert KEY not in out
