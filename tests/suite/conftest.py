"""Shared pieces of the plugin/CLI tests: pytester, and the example endpoint as a subprocess.

Each endpoint (correct or with one injected defect) is started once per test module and
killed by its PID at the end; it listens on an ephemeral loopback port and announces it
with a first stdout line ``LISTENING host:port``.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "minimal_endpoint"
ENDPOINT = EXAMPLE / "endpoint.py"
MANIFEST = EXAMPLE / "manifest.json"
_START_LIMIT_S = 120.0  # a start on a loaded 2-core machine has taken over 30 s


@dataclass(frozen=True)
class Endpoint:
    address: str
    defect: str | None
    manifest: Path = MANIFEST


@contextlib.contextmanager
def running_endpoint(tmp: Path, defect: str | None = None,
                     args: tuple[str, ...] = ()) -> Iterator[Endpoint]:
    """Start the example endpoint (``args``: more of its options, e.g. ``--delta-delay-ms``);
    yield once it announced its address; kill it by PID."""
    out = tmp / f"endpoint-{defect or 'correct'}.out"
    err = tmp / f"endpoint-{defect or 'correct'}.err"
    cmd = [sys.executable, str(ENDPOINT), "--listen", "127.0.0.1:0", *args]
    if defect:
        cmd += ["--defect", defect]
    with out.open("wb") as fout, err.open("wb") as ferr:
        proc = subprocess.Popen(cmd, stdout=fout, stderr=ferr, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + _START_LIMIT_S
        address = None
        while address is None:
            first = out.read_text(encoding="utf-8", errors="replace").partition("\n")
            if first[1] and first[0].startswith("LISTENING "):
                address = first[0].split()[1]
            elif proc.poll() is not None:
                pytest.fail(f"endpoint exited with {proc.returncode}: "
                            f"{err.read_text(errors='replace')[-2000:]}")
            elif time.monotonic() > deadline:
                pytest.fail(f"endpoint did not announce its address within {_START_LIMIT_S}s")
            else:
                time.sleep(0.05)
        yield Endpoint(address, defect)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """The correct example endpoint, one per test module."""
    with running_endpoint(tmp_path_factory.mktemp("endpoint")) as ep:
        yield ep


def suite_args(ep: Endpoint, *extra: str, results: str = "results.json") -> list[str]:
    # hypothesis's plugin costs seconds of import per inner run and is not needed there
    return ["--nnrp-target", ep.address, "--manifest", str(ep.manifest),
            "--nnrp-results", results, "-p", "no:hypothesispytest", *extra]


@pytest.fixture(scope="session")
def args_for() -> Callable[..., list[str]]:
    """``args_for(endpoint, *extra)``: the plugin options for a run against ``endpoint``."""
    return suite_args


@pytest.fixture(scope="session")
def start_endpoint() -> Callable[..., contextlib.AbstractContextManager[Endpoint]]:
    """``with start_endpoint(tmpdir, defect) as ep:`` for modules that need a variant."""
    return running_endpoint
