"""Every freedom in one endpoint (issue 43 item 3), over the real wire.

The example endpoint's ``every-freedom`` variant (``freedoms.py``) takes at once every choice
the three normative texts leave open, the other way from the endpoint's default. The suite's
default mode must pass it: every recipe of Levels 1 to 3, and 1,000 generated cases (four
seeds of 250, ``--concurrency 4``, the four runs side by side). Each freedom quotes its sentence
(checked here against ``upstream/``) and is listed in docs/verdicts.md#freedoms.

Removal checks (the variant without one freedom still passes; the suite before issue 43
failed each freedom taken alone, with the rules ``every_freedom_evidence.json`` records) run
with ``NNRP_FREEDOM_REMOVALS=1``: one endpoint and one recipe run per freedom, too slow for
every run of the test command.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "minimal_endpoint"
_SPEC = importlib.util.spec_from_file_location("example_freedoms", EXAMPLE / "freedoms.py")
assert _SPEC is not None and _SPEC.loader is not None
_FREEDOMS = sys.modules.setdefault("example_freedoms", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(_FREEDOMS)
FREEDOMS, DESIGN, CONTRACT = _FREEDOMS.FREEDOMS, _FREEDOMS.DESIGN, _FREEDOMS.CONTRACT
EVERY_FREEDOM = _FREEDOMS.EVERY_FREEDOM
MANIFEST = EXAMPLE / "manifest-levels.json"
VARIANT = ("--levels", "3", "--variant", EVERY_FREEDOM)
UPSTREAM = REPO / "upstream" / "nnrp-doc" / "docs"
TEXTS = {DESIGN: UPSTREAM / "en" / "design" / "openai-compatible-profile.md",
         CONTRACT: UPSTREAM / "public" / "contracts" / "openai-compatible-1.json"}
EVIDENCE = Path(__file__).with_name("every_freedom_evidence.json")
SEEDS = (1, 2, 3, 4)
PER_SEED = 250
#: the one recipe the generated runs carry (the CLI runs at least one); every recipe runs in
#: the recipe test
ONE_RECIPE = REPO / "recipes" / "level1" / "chat-non-streaming-body.yaml"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _section(path: Path, number: str) -> str:
    """The text of the profile design's ``## number.`` section (to the next heading)."""
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^#+ {re.escape(number)}\.? .*?(?=^#+ \d)", text + "\n## 99 ",
                      re.M | re.S)
    assert match, f"no section {number}"
    return match.group(0)


def test_each_freedom_quotes_its_sentence_word_for_word() -> None:
    for name, freedom in FREEDOMS.items():
        if freedom.document == DESIGN:
            where = _section(TEXTS[DESIGN], freedom.section)
        else:
            where = TEXTS[CONTRACT].read_text(encoding="utf-8")
            node: Any = json.loads(where)
            for key in re.findall(r"response\.[\w.]+?(?=\.fields)|[^.]+", freedom.section):
                node = node[key]  # the cited member exists
        assert _flat(freedom.quote) in _flat(where), (name, freedom.section, freedom.quote)


def test_verdicts_lists_every_freedom_with_its_sentence() -> None:
    text = (REPO / "docs" / "verdicts.md").read_text(encoding="utf-8")
    section = text.partition("{#freedoms}")[2].partition("\n## ")[0]
    assert section, "docs/verdicts.md has no section {#freedoms}"
    flat = _flat(section)
    doubtful = section.partition("\nDoubtful")[2].partition("\nConsidered and not taken")[0]
    assert doubtful, "the section lists no doubtful freedoms"
    for name, freedom in FREEDOMS.items():
        assert f"| `{name}` |" in section, name
        assert _flat(freedom.quote) in flat, (name, freedom.quote)
        assert (f"`{name}`" in doubtful) == bool(freedom.doubt), (name, "doubtful?")


def test_the_evidence_names_every_freedom() -> None:
    evidence = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    assert set(evidence["freedoms"]) == set(FREEDOMS)


# --- over the wire ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def every_freedom(tmp_path_factory: pytest.TempPathFactory, start_endpoint: Any) -> Any:
    with start_endpoint(tmp_path_factory.mktemp("ep"), None, VARIANT) as ep:
        yield dataclasses.replace(ep, manifest=MANIFEST)


def _command(ep: Any, *args: str) -> list[str]:
    return [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
            "--manifest", str(ep.manifest), "--model", "minimal-model",
            "--results", "r.json", "--timeout", "10", *args]


def _failures(cwd: Path) -> list[str]:
    """``case | rule | message`` of every failed finding of the run in ``cwd``."""
    doc = json.loads((cwd / "r.json").read_text(encoding="utf-8"))
    return [f"{r['id']} | {f['rule']} | {f['message'][:300]}" for r in doc["results"]
            if r["outcome"] == "failed" for f in r["diagnostics"]["findings"]
            if f["level"] == "failed"]


def _counts(cwd: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in json.loads((cwd / "r.json").read_text(encoding="utf-8"))["results"]:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return counts


def _run(cwd: Path, ep: Any, *args: str) -> tuple[int, str]:
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(_command(ep, *args), cwd=cwd, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout + proc.stderr


def test_every_recipe_passes(tmp_path: Path, every_freedom: Any) -> None:
    started = time.monotonic()
    code, out = _run(tmp_path, every_freedom)
    counts = _counts(tmp_path)
    print(f"every-freedom, every recipe: {counts} in {time.monotonic() - started:.1f} s")
    assert counts.get("failed", 0) == 0 and code == 0, "\n".join(_failures(tmp_path)) or out
    # Levels 1-3 and upstream's, none skipped but the cancels its one-delta answers never let
    # the suite exercise (not exercised: judged nothing, failed nothing)
    results = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["results"]
    skipped = {r["id"]: r["diagnostics"].get("verdict") for r in results
               if r["outcome"] == "skipped"}
    assert set(skipped.values()) <= {"not-exercised"}, skipped
    assert counts.get("passed", 0) + len(skipped) >= 49, counts


@pytest.mark.timeout(900)
def test_a_thousand_generated_cases_pass(tmp_path: Path, every_freedom: Any) -> None:
    started = time.monotonic()
    runs = {}
    for seed in SEEDS:
        cwd = tmp_path / f"seed-{seed}"
        cwd.mkdir()
        args = ("--recipes", str(ONE_RECIPE), "--generate", str(PER_SEED), "--seed", str(seed),
                "--concurrency", "4")
        runs[seed] = (cwd, subprocess.Popen(
            _command(every_freedom, *args), cwd=cwd, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL))
    failures, generated = [], 0
    try:
        for seed, (cwd, proc) in runs.items():
            out, _ = proc.communicate(timeout=800)
            assert "Traceback" not in out, out[-3000:]
            counts = _counts(cwd)
            generated += sum(counts.values()) - 1
            failures += [f"seed {seed}: {line}" for line in _failures(cwd)]
            print(f"seed {seed}: {counts}")
    finally:
        for _, proc in runs.values():  # a run left over by a failure ends with the test
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    print(f"every-freedom, {generated} generated cases ({len(SEEDS)} seeds side by side, "
          f"--concurrency 4): {time.monotonic() - started:.1f} s")
    assert generated == PER_SEED * len(SEEDS)
    assert failures == [], "\n".join(failures[:40])


@pytest.mark.skipif(os.environ.get("NNRP_FREEDOM_REMOVALS") != "1",
                    reason="removal checks: NNRP_FREEDOM_REMOVALS=1 (one endpoint per freedom)")
@pytest.mark.parametrize("name", sorted(FREEDOMS))
def test_without_one_freedom_still_passes(tmp_path: Path, start_endpoint: Any,
                                          name: str) -> None:
    with start_endpoint(tmp_path, None, (*VARIANT, "--without", name)) as ep:
        _run(tmp_path / "run", dataclasses.replace(ep, manifest=MANIFEST))
    failures = _failures(tmp_path / "run")
    assert failures == [], "\n".join(failures)
