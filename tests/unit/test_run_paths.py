"""The run documents name files relative to where the run started, so recorded results read
the same in any clone (issue 17: portable evidence)."""

from __future__ import annotations

from pathlib import Path

from nnrp_conformance.session import RunOptions


def test_paths_are_shown_relative_to_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "checkout" / "reports" / "evidence" / "vllm-x"
    opts = RunOptions(target="127.0.0.1:1", base_dir=run_dir)
    assert opts.shown(run_dir / "case-results.json") == "case-results.json"
    assert opts.shown(tmp_path / "checkout" / "manifests" / "m.json") == "../../../manifests/m.json"
    assert str(tmp_path) not in opts.shown(run_dir / "evidence")


def test_the_execution_plan_names_relative_artifacts(tmp_path: Path) -> None:
    opts = RunOptions(target="127.0.0.1:1", base_dir=tmp_path, results=Path("out/r.json"))
    art = opts.artifacts()
    assert art.results == tmp_path / "out" / "r.json"  # files are still written where asked
    assert opts.shown(art.results) == "out/r.json"
    assert opts.shown(art.evidence_dir) == "out/evidence"


def test_a_path_sharing_only_the_root_is_left_as_given(tmp_path: Path) -> None:
    opts = RunOptions(target="127.0.0.1:1", base_dir=tmp_path)
    assert opts.shown("/") == "/"
