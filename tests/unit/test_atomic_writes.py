"""Documents written into a folder several runs share stay whole and never fail a run: each
writer renames its own temporary file into place (the last one wins). With one fixed temporary
name, a run's rename could take another's file, and the other then failed with a setup error
(seen as a kill-rate defect 'surviving' with exit 2 in two fresh-clone CI runs, four runs
writing one execution plan)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from nnrp_conformance.artifacts import write_json
from nnrp_conformance.trace import write_trace

WRITERS = 4
WRITES = 150


def _hammer(write: object, path: Path) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def writer(n: int) -> None:
        start.wait()
        for i in range(WRITES):
            try:
                write(path, n, i)  # type: ignore[operator]
            except BaseException as exc:  # the property under test: no writer ever fails
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


def test_concurrent_json_writers_never_fail_and_leave_a_whole_document(tmp_path: Path) -> None:
    path = tmp_path / "execution-plan.json"
    body = {"cases": ["x" * 200] * 200}

    def write(p: Path, n: int, i: int) -> None:
        write_json(p, {**body, "writer": n, "i": i})

    assert _hammer(write, path) == []
    assert json.loads(path.read_text())["cases"] == body["cases"]
    assert [p.name for p in tmp_path.iterdir()] == ["execution-plan.json"]  # no temp file left


def test_concurrent_trace_writers_never_fail(tmp_path: Path) -> None:
    path = tmp_path / "case.trace.jsonl"

    def write(p: Path, n: int, i: int) -> None:
        write_trace(p, ({"seq": k, "writer": n} for k in range(300)))

    assert _hammer(write, path) == []
    assert len(path.read_text().splitlines()) == 300
    assert [p.name for p in tmp_path.iterdir()] == ["case.trace.jsonl"]
