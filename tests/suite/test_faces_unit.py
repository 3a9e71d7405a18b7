"""Pieces of the faces that need no endpoint: option parsing, report paths, marker names,
record round trips (what xdist ships), and the reports rendered from records."""

from __future__ import annotations

import dataclasses
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nnrp_conformance.artifacts import report_paths
from nnrp_conformance.events import CaseRecord, RunFinished, RunStarted
from nnrp_conformance.findings import Finding
from nnrp_conformance.plugin import capability_marker
from nnrp_conformance.reports.format import event_runs, findings_block, reason_text
from nnrp_conformance.reports.html import render_html
from nnrp_conformance.reports.markdown import render_markdown
from nnrp_conformance.session import RunOptions, SetupError, parse_params


def _record(outcome: str = "failed", findings: int = 2) -> CaseRecord:
    return CaseRecord(
        id="level1.chat.x", outcome=outcome, terminal="success", level=1, status="optional",
        selection="selected", reason=None, duration_s=0.5,
        event_types=("response.output_text.delta",) * 3 + ("response.completed",),
        findings=tuple(Finding(rule=f"rule.{i}", message=f"<bad & {i}>", event_index=i,
                                     expected={"a": 1}, seen=[1, 2], spec="§4")
                       for i in range(findings)),
        message="m", upstream={"id": "level1.chat.x", "outcome": outcome,
                               "terminal": "success"})


def test_params_parse_and_reject() -> None:
    assert parse_params(["A=1", "r.id:B=x=y", "C="]) == {"A": "1", "r.id:B": "x=y", "C": ""}
    with pytest.raises(SetupError, match="KEY=VALUE"):
        parse_params(["novalue"])


def test_report_paths() -> None:
    assert report_paths("out/r") == (Path("out/r.md"), Path("out/r.html"))
    assert report_paths("out/r.html") == (Path("out/r.md"), Path("out/r.html"))
    assert report_paths("out/r.md") == (Path("out/r.md"), Path("out/r.html"))


def test_artifact_defaults(tmp_path: Path) -> None:
    art = RunOptions(base_dir=tmp_path, results=Path("x/res.json")).artifacts()
    assert art.results == tmp_path / "x" / "res.json"
    assert art.plan == tmp_path / "x" / "execution-plan.json"
    assert art.evidence_dir == tmp_path / "x" / "evidence"
    assert art.report_md is None


def test_capability_markers_are_identifiers() -> None:
    assert capability_marker("api.streaming") == "streaming"
    assert capability_marker("api.chat.completions.create") == "chat_completions_create"
    assert capability_marker("api.extension.vllm-x.critical") == "extension_vllm_x_critical"
    assert capability_marker("api.level1") == "level1"


def test_record_round_trip_is_json() -> None:
    rec = _record()
    data = json.loads(json.dumps(rec.to_dict()))
    assert CaseRecord.from_dict(data) == rec


def test_event_runs_and_reason() -> None:
    assert event_runs(["a", "a", "b", "a"]) == "#0-#1 a ×2, #2 b, #3 a"
    assert event_runs([]) == "none"
    assert reason_text(_record()).startswith("rule.0: <bad & 0> (+1 more)")
    # a failed case's reason is what failed it, not a recommendation found before it
    shown = _record()
    shown = dataclasses.replace(shown, findings=(
        dataclasses.replace(shown.findings[0], level="non-strict"), *shown.findings[1:]))
    assert reason_text(shown).startswith("rule.1: <bad & 1> (+1 more)")
    assert len(reason_text(_record(), 20)) <= 20
    lines = findings_block(_record(findings=12))
    assert lines[-1].startswith("… and 4 more finding(s)")


def test_markdown_and_html_escape_and_are_self_contained() -> None:
    started = RunStarted(target="127.0.0.1:1", adapter="a|b", profile="openai-compatible",
                         schema_version="openai-compatible/1", cases=(), plan_path=None,
                         manifest_path=None)
    finished = RunFinished([_record(), _record("passed", 0)], 1.0)
    md = render_markdown(started, finished)
    assert "a\\|b" in md and "[rule.0]" in md and "**FAILED**" in md
    html = render_html(started, finished)
    assert "<bad &" not in html and "&lt;bad &amp; 0&gt;" in html
    for external in ("<script", "<link", "src=", "url("):
        assert external not in html
    HTMLParser().feed(html)  # parses without error


class _Recorder:
    def __init__(self, fail_on: str | None = None, name: str | None = None) -> None:
        self.seen: list[str] = []
        self.fail_on = fail_on
        self.closed = False
        if name:
            self.name = name

    def start(self) -> None:
        self.seen.append("start")
        if self.fail_on == "start":
            raise RuntimeError("cannot open the output")

    def handle_event(self, event: object) -> None:
        kind = type(event).__name__
        self.seen.append(kind)
        if kind == self.fail_on:
            raise OSError(28, "No space left on device")

    def close(self) -> None:
        self.closed = True


def test_a_failing_report_is_isolated_named_and_gets_no_more_events() -> None:
    from nnrp_conformance.events import CaseFinished, EventBus

    broken, late, fine = _Recorder("CaseFinished", "markdown"), _Recorder("start"), _Recorder()
    bus = EventBus([broken, late, fine])
    bus.start()
    started = RunStarted(target="t", adapter="a", profile="p", schema_version="s", cases=(),
                         plan_path=None, manifest_path=None)
    bus.emit(started)
    bus.emit(CaseFinished(_record()))
    bus.emit(RunFinished([_record()], 1.0))
    bus.close()
    # the run and the other report go on; each broken one is named once, with where and why
    assert fine.seen == ["start", "RunStarted", "CaseFinished", "RunFinished"] and fine.closed
    assert broken.seen == ["start", "RunStarted", "CaseFinished"] and not broken.closed
    assert late.seen == ["start"] and not late.closed
    assert [str(e) for e in bus.errors] == [
        "report _Recorder failed at start: RuntimeError: cannot open the output",
        "report markdown failed at CaseFinished: OSError: [Errno 28] No space left on device",
    ]
    assert bus.records["level1.chat.x"].outcome == "failed"
