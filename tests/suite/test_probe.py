"""``vllm-nnrp probe``, the deployment's health signal, run as the real command over loopback.

Against the example endpoint (docs/examples/minimal_endpoint, started by this folder's
``start_endpoint`` fixture): ready when it serves the capability document; not ready when it
never answers (its ``silence`` defect) or answers the discovery with an error (its
``upstream-names`` variant). Also: nothing
listening, a peer that accepts TCP and never opens a session (a hung server: the probe must
still end within its bound), and bad addresses. Every failure is one line on stderr, never a
traceback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 1.5  # the probe's --timeout in these tests
# the probe's own bound (timeout + its 2 s grace) and the interpreter's start on a slow machine
BOUND_S = TIMEOUT + 2.0 + 10.0


def probe(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``vllm-nnrp probe ARGS`` (the command table's entry) in its own process."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "vllm_nnrp_adapter.cli", "probe", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    return done, time.monotonic() - started


def one_line_failure(done: subprocess.CompletedProcess[str]) -> str:
    assert done.stdout == "", done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ready_when_the_capability_document_comes_back(tmp_path: Path,
                                                       start_endpoint: Any) -> None:
    with start_endpoint(tmp_path) as ep:
        address = ep.address
        done, _ = probe(address, "--timeout", "10")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    # the example endpoint's document: its one model, its profile id, level 1
    assert done.stdout == (
        f"ready {address}: model=minimal-model profile=openai-compatible level=1\n"
    )


def test_an_endpoint_that_never_answers_is_not_ready_within_the_bound(
        tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "silence") as ep:
        address = ep.address
        done, took = probe(address, "--timeout", str(TIMEOUT))
    assert done.returncode == 1
    assert one_line_failure(done) == (
        f"vllm-nnrp probe: not ready: {address}: session open, but no capability document "
        f"within {TIMEOUT:g}s"
    )
    assert took < BOUND_S


def test_an_error_answer_to_the_discovery_is_not_ready(tmp_path: Path,
                                                       start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, None, ("--variant", "upstream-names")) as ep:
        address = ep.address
        done, _ = probe(address, "--timeout", "10")
    assert done.returncode == 1
    line = one_line_failure(done)
    assert line.startswith(f"vllm-nnrp probe: not ready: {address}: nnrp.capabilities.get ")
    assert "unsupported_operation" in line


def test_nothing_listening() -> None:
    port = free_port()
    done, took = probe(f"127.0.0.1:{port}", "--timeout", str(TIMEOUT))
    assert done.returncode == 1
    assert (
        one_line_failure(done)
        == f"vllm-nnrp probe: not ready: nothing listening on 127.0.0.1:{port}"
    )
    assert took < BOUND_S


def test_a_hung_server_that_accepts_and_never_answers_ends_the_probe_in_time() -> None:
    """The kernel accepts the TCP connection; nothing ever opens a session. nnrp-py's connect
    thread waits on such a peer until it goes away: the probe must not wait with it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        done, took = probe(f"127.0.0.1:{port}", "--timeout", str(TIMEOUT))
    assert done.returncode == 1
    assert one_line_failure(done) == (
        f"vllm-nnrp probe: not ready: 127.0.0.1:{port}: no NNRP session within {TIMEOUT:g}s"
    )
    assert took < BOUND_S


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("localhost", "a port is required"),
        ("127.0.0.1:0", "port 0 names no listener"),
        ("127.0.0.1:99999", "out of range"),
        ("gopher://127.0.0.1:70", "unknown scheme 'gopher'"),
    ],
)
def test_a_bad_address_is_a_configuration_error(address: str, says: str) -> None:
    done, _ = probe(address)
    assert done.returncode == 2
    line = one_line_failure(done)
    assert line.startswith("vllm-nnrp probe: bad address: "), line
    assert says in line


def test_a_timeout_must_be_positive() -> None:
    done, _ = probe("127.0.0.1:4433", "--timeout", "0")
    assert done.returncode == 2
    assert one_line_failure(done) == "vllm-nnrp probe: error: --timeout must be above 0"
