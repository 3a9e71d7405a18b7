"""Which shared-memory files are orphans: the rule both the adapter's stop path and the
real-vLLM tests' guard use to clean up after vLLM's processes (processes.orphaned_shm)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.processes import orphaned_shm, remove_leftovers

SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm here")


def _dead_pid() -> int:
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid += 1
    return pid


@pytest.fixture
def files(tmp_path: Path) -> Iterator[dict[str, Path]]:
    tag = uuid.uuid4().hex[:8]
    # The two orphans live outside /dev/shm: the real-vLLM tests' guard, which may run beside
    # these tests in another worker, removes orphaned vLLM-named files from /dev/shm. The rule
    # reads names and holders, not the folder; a holder is only seen in /dev/shm.
    made = {
        "held": SHM / f"nnrp-test-held-{tag}",
        "free": tmp_path / f"sem.mp-test{tag}",
        "live_kmp": SHM / f"__KMP_REGISTERED_LIB_{os.getpid()}_{tag}",
        "dead_kmp": tmp_path / f"__KMP_REGISTERED_LIB_{_dead_pid()}_{tag}",
    }
    for path in made.values():
        path.write_bytes(b"x")
    try:
        yield made
    finally:
        for path in made.values():
            path.unlink(missing_ok=True)


def test_only_files_nobody_holds_are_orphans(files: dict[str, Path]) -> None:
    with files["held"].open("rb"):  # held open by a live process: this one
        assert orphaned_shm(files.values()) == {files["free"], files["dead_kmp"]}
    assert orphaned_shm([]) == set()


def test_remove_leftovers_removes_only_orphans(files: dict[str, Path]) -> None:
    with files["held"].open("rb"):
        removed = remove_leftovers([], files.values())
    assert set(removed) == {files["free"], files["dead_kmp"]}
    assert files["held"].exists() and files["live_kmp"].exists()
    assert not files["free"].exists() and not files["dead_kmp"].exists()
