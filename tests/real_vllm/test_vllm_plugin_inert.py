"""The vLLM plugin does nothing without ``NNRP_PLUGIN_LISTEN``: real vLLM pieces, no engine.

Runs inside a vLLM venv (it imports vllm); test_suite_against_adapter.py runs it there in the
same pytest process as test_backend_real.py. vLLM's own pieces do the work: its entry-point
loader finds and calls our general plugin, its ``vllm serve`` argument parser takes
``--middleware``, its ``build_app`` mounts the middleware, and the app's real ASGI lifespan
(vLLM's ``lifespan`` included) runs start-up and shutdown through it. Without the switch: no log
record, no thread, no listening port, and the engine objects in ``app.state`` are never touched.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import threading

import pytest

pytest.importorskip("vllm")

from vllm_nnrp_adapter.launch import vllm_plugin
from vllm_nnrp_adapter.launch.processes import listening_tcp_ports

pytestmark = pytest.mark.real_vllm


@pytest.fixture(autouse=True)
def switch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(vllm_plugin.ENV_PREFIX):
            monkeypatch.delenv(name)


class _Untouchable:
    """Stands in for vLLM's engine client and serving objects: any use fails the test."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the inert plugin touched app.state (.{name})")


def _snapshot() -> tuple[set[str], set[int]]:
    """Our server's threads (all named nnrp-*) and this process's listening TCP ports."""
    threads = {t.name for t in threading.enumerate() if t.name.startswith("nnrp")}
    return threads, listening_tcp_ports(os.getpid())


def _nothing_new(before: tuple[set[str], set[int]]) -> bool:
    threads, ports = _snapshot()
    return not threads and ports <= before[1]


def _our_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("vllm_nnrp_adapter")]


def test_the_entry_point_is_installed_in_the_vllm_venv() -> None:
    from vllm.plugins import DEFAULT_PLUGINS_GROUP

    eps = importlib.metadata.entry_points(group=DEFAULT_PLUGINS_GROUP)
    ours = [ep for ep in eps if ep.name == "nnrp"]
    assert [ep.value for ep in ours] == ["vllm_nnrp_adapter.vllm_plugin:register"], list(eps)


def test_vllm_loads_and_calls_the_plugin_and_it_does_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from vllm.plugins import DEFAULT_PLUGINS_GROUP, load_plugins_by_group

    plugins = load_plugins_by_group(DEFAULT_PLUGINS_GROUP)
    assert plugins["nnrp"] is vllm_plugin.register
    before = _snapshot()
    with caplog.at_level(logging.DEBUG, logger="vllm_nnrp_adapter"):
        assert plugins["nnrp"]() is None
    assert _our_records(caplog) == []
    assert _nothing_new(before)
    assert vllm_plugin._armed is None
    assert logging.getLogger("vllm_nnrp_adapter").handlers == []


def test_the_middleware_in_vllms_app_passes_the_lifespan_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import vllm

    from vllm_nnrp_adapter.vllm_backend.families import family_for

    # where this vLLM keeps its server's objects is its family binding's to say
    sym = family_for(vllm.__version__).symbols()
    build_app = sym.build_app
    parser = sym.make_arg_parser(sym.parser_cls(prog="vllm serve"))
    args = parser.parse_args(
        ["--model", "unused", "--host", "127.0.0.1", "--middleware", vllm_plugin.MIDDLEWARE]
    )
    assert args.middleware == [vllm_plugin.MIDDLEWARE]
    app = build_app(args, ("generate",))
    assert vllm_plugin.NnrpServing in [m.cls for m in app.user_middleware]
    # what init_app_state would have set; the inert plugin must not look at any of it
    app.state.log_stats = False
    app.state.engine_client = _Untouchable()
    app.state.openai_serving_chat = _Untouchable()
    before = _snapshot()

    async def lifespan() -> list[str]:
        inbox: asyncio.Queue[dict] = asyncio.Queue()
        sent: list[str] = []

        async def receive() -> dict:
            return await inbox.get()

        async def send(message: dict) -> None:
            sent.append(message["type"])
            if message["type"] == "lifespan.startup.complete":
                assert _nothing_new(before)  # nothing started with the app
                await inbox.put({"type": "lifespan.shutdown"})

        await inbox.put({"type": "lifespan.startup"})
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        await asyncio.wait_for(app(scope, receive, send), timeout=60)
        return sent

    with caplog.at_level(logging.DEBUG, logger="vllm_nnrp_adapter"):
        sent = asyncio.run(lifespan())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert _our_records(caplog) == []
    assert _nothing_new(before)
