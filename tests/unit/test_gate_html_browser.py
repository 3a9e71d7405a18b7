"""The release-gate pages as a release manager meets them: the gate run on the recorded
evidence (reports/evidence, a full run: four vLLM versions, ~1,150 benchmark rows), its HTML
page laid out by a real headless Chromium (Debian's ``chromium``; scripts/test installs
it when missing). A script added to a copy of the page writes the layout into the DOM, read
back with ``--dump-dom``: the summary sections come first and in order (the Levels table
above the benchmarks), and the page never scrolls sideways at 1,280 px, every fold open. The
Markdown page follows the same order; every level not claimed says why; a benchmark is
described by its own run's size.

Without Chromium the test is skipped, except under scripts/test (NNRP_REQUIRE_BROWSER=1),
where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance.gate import run_gate
from nnrp_conformance.reports import gate_summary
from nnrp_conformance.reports.gate_html import render_gate_html
from nnrp_conformance.reports.gate_markdown import render_gate_markdown

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "reports" / "evidence"
POLICY = REPO / "manifests" / "vllm-nnrp-adapter.release-policy.json"
WIDTH = 1280
#: the order a release manager reads: the summary (verdict, conditions, levels, recipes, parity)
#: before any detail; written out here, not read from the renderer, so moving a section fails
ORDER = ["conditions", "levels", "recipes", "parity", "benchmarks", "files", "environment"]

#: the measurements: each section's top with every fold closed (as the page opens), then the
#: page's widths with every fold open (the widest the page can get)
_MEASURE = """
<script>
const tops = {};
for (const s of document.querySelectorAll('main > section')) {
  tops[s.id] = s.getBoundingClientRect().top + window.scrollY;
}
const closedHeight = document.documentElement.scrollHeight;
for (const d of document.querySelectorAll('details')) d.open = true;
let widest = 0, widestWhat = '';
for (const el of document.querySelectorAll('main *')) {
  const right = el.getBoundingClientRect().right;
  if (right > widest) { widest = right; widestWhat = el.tagName + ' ' + el.className; }
}
const out = document.createElement('pre');
out.id = 'nnrp-measure';
out.textContent = JSON.stringify({
  tops, closedHeight, innerWidth: window.innerWidth,
  scrollWidth: document.documentElement.scrollWidth, widest, widestWhat});
document.body.appendChild(out);
</script>
"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("NNRP_REQUIRE_BROWSER") == "1":
        pytest.fail("chromium is not installed (scripts/test installs Debian's chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def measure(html: str, tmp: Path) -> dict[str, Any]:
    """Lay ``html`` out in headless Chromium at 1,280 px; the script's measurements."""
    page = tmp / "page.html"
    page.write_text(html.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="nnrp-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", f"--window-size={WIDTH},900",
             "--hide-scrollbars", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r'<pre id="nnrp-measure">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"no measurements in the DOM (exit {proc.returncode}): {proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"')
                                        .replace("&amp;", "&").replace("&lt;", "<")
                                        .replace("&gt;", ">"))
    return result


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    """The gate's report on the recorded evidence, made now (this checkout's gate)."""
    report: dict[str, Any] = run_gate(RECORDED, readme=REPO / "README.md", policy=POLICY).report
    return report


def test_markdown_follows_the_same_order(recorded: dict[str, Any]) -> None:
    markdown = render_gate_markdown(recorded)
    heads = [line[3:] for line in markdown.splitlines() if line.startswith("## ")]
    titles = dict(gate_summary.SECTIONS)
    assert heads == [titles[k] for k in ORDER]


def test_every_level_not_claimed_says_why(recorded: dict[str, Any]) -> None:
    reasons = gate_summary.level_reasons(recorded)
    # 0.18.1 keeps Level 1 only: its Responses stream breaks with tools (the run's manifest)
    assert {(v, level) for v, level, _ in reasons} == {("0.18.1", 2), ("0.18.1", 3)}
    why = dict(((v, level), text) for v, level, text in reasons)
    assert "responses.create" in why["0.18.1", 2]
    assert "the release policy declares Level(s) [1] for vLLM 0.18.1" in why["0.18.1", 2]
    for page in (render_gate_html(recorded), render_gate_markdown(recorded)):
        assert "no reason recorded" not in page and "responses.create" in page


def test_a_benchmark_is_sized_by_its_own_run(recorded: dict[str, Any]) -> None:
    soak = next(b for b in gate_summary.benchmarks(recorded) if b["name"] == "soak")
    ops = json.loads((RECORDED / "bench" / "soak.json").read_text())["parameters"]["operations"]
    assert f"operations {ops:,}" in gate_summary.run_sizes(soak)
    # the policy's title names what is checked, never a size the run may not have had
    assert not any(ch.isdigit() for ch in soak["title"])


def test_a_benchmark_measured_beside_a_build_says_so(recorded: dict[str, Any]) -> None:
    latency = next(b for b in gate_summary.benchmarks(recorded)
                   if b["name"] == "streaming-latency")
    beside = {**latency, "parameters": {**latency["parameters"],
                                        "measured_beside": "the release's vLLM builds"}}
    assert gate_summary.run_sizes(beside).endswith("measured beside the release's vLLM builds")


def test_summary_first_and_no_sideways_scroll_at_1280(recorded: dict[str, Any],
                                                     tmp_path: Path) -> None:
    m = measure(render_gate_html(recorded), tmp_path)
    assert sorted(m["tops"], key=m["tops"].get) == ORDER, m["tops"]
    tops = [m["tops"][k] for k in ORDER]
    assert tops == sorted(tops) and len(set(tops)) == len(tops), m["tops"]
    # the Levels table, the best summary, sits above every benchmark's detail
    assert m["tops"]["levels"] < m["tops"]["benchmarks"]
    assert m["innerWidth"] == WIDTH
    assert m["scrollWidth"] <= WIDTH, m
    assert m["widest"] <= WIDTH, m
