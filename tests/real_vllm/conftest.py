"""Real-vLLM tests: the vLLM CPU venvs are built by scripts/vllm-venv (the test command does).

With NNRP_REQUIRE_REAL_VLLM=1 (set by scripts/test, hence CI) a missing venv is a failure,
not a skip: the real path must never silently drop out of the run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from long_context import long_context_adapter
from probe import PLUGIN_KEY

from nnrp_conformance.options import API_KEY_ENV
from vllm_nnrp_adapter import NEWEST_TESTED
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import (
    ConformanceSetupError,
    engine_environment,
    tiny_model,
    vllm_python,
)
from vllm_nnrp_adapter.launch.processes import orphaned_shm

#: the newest tested version: what the test command runs real vLLM on (the release run runs
#: the suite, smoke and benchmarks on every tested version: docs/testing.md#real-vllm)
VERSIONS = (NEWEST_TESTED,)
REPO = Path(__file__).resolve().parents[2]
# Engine start-up, the tiny model and vLLM's warm-up run inside the first test of a module.
REAL_VLLM_TIMEOUT_S = 900


SHM = Path("/dev/shm")
#: shared-memory files vLLM's processes make: the OpenMP runtime's registration, the engine's
#: ring buffer and multiprocessing's named semaphores
SHM_PATTERNS = ("__KMP_REGISTERED_LIB_*", "psm_*", "sem.mp-*")
SHM_LEFT: list[tuple[str, list[str]]] = []  # (test id, files it left and this session removed)


def _vllm_shm_files() -> set[Path]:
    return {p for pattern in SHM_PATTERNS for p in SHM.glob(pattern)}


def _sweep(before: set[Path], who: str) -> None:
    left = orphaned_shm(_vllm_shm_files() - before)
    for path in left:
        with contextlib.suppress(OSError):
            path.unlink()
    if left:
        SHM_LEFT.append((who, sorted(p.name for p in left)))


@pytest.fixture(autouse=True)
def no_shared_memory_left_by_a_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every vLLM process a test starts is the test's: shared-memory files it made that no live
    process holds once the test is over are removed, and named in the run's summary with the
    test that left them (the stop paths remove what they know of; this catches the rest)."""
    before = _vllm_shm_files()
    yield
    _sweep(before, request.node.nodeid)


@pytest.fixture(scope="module", autouse=True)
def no_shared_memory_left_by_a_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """The same for a module's shared adapter, stopped after its last test (an autouse fixture
    is set up before, and torn down after, the module's other fixtures)."""
    before = _vllm_shm_files()
    yield
    _sweep(before, f"{request.node.nodeid} (module fixtures)")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if SHM_LEFT:
        terminalreporter.section("shared memory left by real-vLLM tests (removed)")
        for nodeid, names in SHM_LEFT:
            terminalreporter.write_line(f"{nodeid}: {', '.join(names)}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "current_line_only: runs on the newest tested vLLM only (docs/testing.md#real-vllm): "
        "what it proves is the adapter's own, over a surface the other lines share",
    )
    config.addinivalue_line(
        "markers",
        "stops_shared_adapter: stops a session's shared adapter, so it runs after every other "
        "real-vLLM test (the collection moves it to the end)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    kept, dropped = [], []
    for item in items:
        if here not in Path(item.path).parents:
            kept.append(item)
            continue
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(REAL_VLLM_TIMEOUT_S))
        callspec = getattr(item, "callspec", None)
        version = callspec.params.get("vllm_env") if callspec else None
        if item.get_closest_marker("current_line_only") and version not in (None, NEWEST_TESTED):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    # a test that stops a shared adapter goes last, whatever module it sits in
    items.sort(key=lambda item: item.get_closest_marker("stops_shared_adapter") is not None)


def _refuse_other_checkouts(python: str) -> None:
    """The venv must run this checkout's code, not another clone's (a shared cache once did)."""
    probe = subprocess.run(
        [python, "-c", "import vllm_nnrp_adapter, nnrp_conformance as s; "
                       "print(vllm_nnrp_adapter.__file__); print(s.__file__)"],
        capture_output=True, text=True, timeout=120, env=engine_environment(python),
    )
    files = probe.stdout.split()
    if probe.returncode != 0 or len(files) != 2:
        pytest.fail(f"{python} cannot import the project: {probe.stderr.strip()[-2000:]}")
    foreign = [f for f in files if REPO not in Path(f).resolve().parents]
    if foreign:
        pytest.fail(f"{python} runs another checkout's code ({foreign}), not {REPO}: "
                    f"run scripts/vllm-venv VERSION in this checkout")


def _python_for(version: str) -> str:
    try:
        return vllm_python(version, build=False)
    except ConformanceSetupError as exc:
        if os.environ.get("NNRP_REQUIRE_REAL_VLLM") == "1":
            pytest.fail(f"real vLLM {version} is required here: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session", params=VERSIONS, ids=lambda v: f"vllm-{v}")
def vllm_env(request, tmp_path_factory):
    version = request.param
    python = _python_for(version)
    _refuse_other_checkouts(python)
    model = tiny_model(python, tmp_path_factory.getbasetemp() / f"tiny-model-{version}")
    return {"version": version, "python": python, "model": model}


# Adapters shared by the modules that need nothing else of their own: a start-up costs 15-45 s of a
# core. They live while their vLLM line's tests run (pytest runs one line after the other).


@pytest.fixture(scope="session")
def explicit_adapter(vllm_env, tmp_path_factory) -> Iterator[AdapterProcess]:  # type: ignore[no-untyped-def]
    """``vllm-nnrp serve`` with the embeddings engine beside the generating one (the embedded
    default's; on a line without Level 3 the adapter withholds it, and says so).

    On the current line it listens on a local socket (``ipc://``), so the whole suite also runs
    over a second transport against real vLLM; everything else here is TCP."""
    folder = tmp_path_factory.mktemp(f"explicit-{vllm_env['version']}")
    ipc = vllm_env["version"] == NEWEST_TESTED
    with AdapterProcess(vllm_env["python"], vllm_env["model"], log_path=folder / "adapter.log",
                        listen=f"ipc://{folder / 'adapter.sock'}" if ipc else "127.0.0.1:0",
                        embeddings=True) as proc:
        yield proc


@pytest.fixture(scope="session")
def long_adapter(vllm_env, tmp_path_factory) -> Iterator[AdapterProcess]:  # type: ignore[no-untyped-def]
    """The long-context adapter (``long_context.py``) of the cause tests: test_aborts_real and
    test_levels_real. test_aborts_real's server-shutdown test stops it, after every other
    test (``stops_shared_adapter``)."""
    with long_context_adapter(vllm_env, tmp_path_factory, "long-context") as proc:
        yield proc


@pytest.fixture(scope="session")
def plugin_adapter(vllm_env, tmp_path_factory) -> Iterator[AdapterProcess]:  # type: ignore[no-untyped-def]
    """``vllm serve`` with the NNRP plugin: the second start-up path. A test that stops it
    (test_vllm_plugin_real's last) is the last of its line to use it.

    Secured as an operator secures vLLM, with ``VLLM_API_KEY``: its NNRP sessions must
    authenticate and its HTTP API wants the bearer key (``plugin_adapter_key`` below gives its
    tests' clients the key). test_security_real judges the key on this adapter (one engine
    start fewer)."""
    log_path = tmp_path_factory.mktemp(f"plugin-{vllm_env['version']}") / "vllm-serve.log"
    with AdapterProcess(vllm_env["python"], vllm_env["model"], log_path=log_path,
                        startup_path="vllm-plugin",
                        extra_env={"VLLM_API_KEY": PLUGIN_KEY}) as proc:
        yield proc


@pytest.fixture(autouse=True)
def plugin_adapter_key(request: pytest.FixtureRequest,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A test of the keyed plugin adapter sends its key as a provider's CI does: the suite
    from ``NNRP_API_KEY``, the twin from ``OPENAI_API_KEY``, ``probe.connect`` the former.
    Only such a test: a key given to an endpoint that serves no authentication (the example
    endpoint of the documented quickstart) rightly stops the suite's run."""
    if "plugin_adapter" in request.fixturenames:
        monkeypatch.setenv(API_KEY_ENV, PLUGIN_KEY)
        monkeypatch.setenv("OPENAI_API_KEY", PLUGIN_KEY)
