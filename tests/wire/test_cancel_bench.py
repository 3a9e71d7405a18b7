"""The cancel fan-out benchmark runs end to end over the real wire (server in a subprocess)
and writes a schema-valid results document; its figures are not judged here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnrp_conformance import validation
from vllm_nnrp_adapter.benchmark.wire import cancel


def test_cancel_fanout_benchmark_writes_valid_results(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "cancel.json"
    rc = cancel.main(["--rounds", "1", "--fanout", "1", "--fanout", "3", "--json", str(out)])
    assert rc == 0  # non-zero only if the client declared the session broken
    doc = json.loads(out.read_text())
    assert validation.validate("benchmark-results", doc) == []
    names = {m["name"] for m in doc["metrics"]}
    assert {"cancel_fanout.1.cancel_to_terminal", "cancel_fanout.3.stale_frames"} <= names
    assert "cancel under fan-out" in capsys.readouterr().out


def test_cancel_fanout_rejects_nonsense_arguments(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        cancel.main(["--rounds", "0"])
    assert exc.value.code == 2
    assert "--rounds" in capsys.readouterr().err
