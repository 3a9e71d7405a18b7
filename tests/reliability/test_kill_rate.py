"""The suite's own kill rate: every fault-injected example endpoint must fail the run with the
rule that names its defect class, and the correct endpoint must pass. Each run is the real
CLI (``nnrp-conformance run``) in a subprocess against the endpoint in another, bounded by a
hard timeout so a hostile endpoint can never hang CI. The kill rate is printed.

A defect of Levels 2 and 3 (its recipes are under ``recipes/level2`` or ``level3``) runs
against the endpoint serving all three levels (``--levels 3``) with the manifest that claims
them (``manifest-levels.json``); the correct endpoint is judged both ways."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "minimal_endpoint"
CLI = [sys.executable, "-c", "import sys; from nnrp_conformance.cli import main; sys.exit(main())"]
RECIPES = REPO / "recipes"
MANIFEST = EXAMPLE / "manifest.json"
#: the manifest of ``--levels 3``: Levels 1-3, the four operations
MANIFEST_LEVELS = EXAMPLE / "manifest-levels.json"
RUN_LIMIT_S = 240
CASE_TIMEOUT_S = "2"

#: defect -> (defect class, recipes that exercise it, rule ids naming that class)
#: (No "wrong ids" defect: nnrp-py refuses to send a partial result whose metadata names
#: another operation — ValueError in send_partial_result — so no endpoint on the SDK can
#: commit it; the client still checks it, rule partial_result.operation_id. Nor a late
#: delta after a terminal: nnrp-py's server refuses a PARTIAL_RESULT for an ended operation
#: even through its private send — docs/sdk-defects.md item 14.)
DEFECTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "wrong-order": ("tool-call ordering per call id", ("chat-tool-call-forced",), ("order.tool-call",)),
    "tool-call-no-completed": ("tool-call ordering per call id", ("chat-tool-call-forced",), ("order.tool-call",)),
    "tool-call-args-mismatch": ("tool-call arguments", ("chat-tool-call-forced",), ("tool-call.arguments",)),
    "missing-terminal": ("terminal", ("chat-streaming-text",), ("timeout.no-terminal",)),
    "terminal-as-partial": ("terminal", ("chat-streaming-text",),
                            ("wire.partial_result.terminal_event", "terminal.exactly-once")),
    # a drop after a success push: nnrp-py's client refuses it (3/4/105, naming nothing);
    # the client gives it to the one operation settling after its terminal (issue 30)
    "two-terminals": ("frames after a terminal", ("chat-streaming-text",),
                      ("wire.refused_after_terminal",)),
    "tool-calls-shared-index": ("tool calls across calls", ("chat-tool-call-forced",),
                                ("tool-call.index-unique",)),
    "body-tool-calls-disagree": ("tool calls against the body", ("chat-tool-call-forced",),
                                 ("tool-call.body-agreement",)),
    "late-event-after-cancel": ("late events / cancel handling", ("chat-cancel-client",),
                                ("cancel.late-event", "wire.partial_after_cancel", "wire.result_after_cancel",
                                 "cancel.unanswered")),
    "cancel-wrong-drop": ("cancel handling", ("chat-cancel-client",), ("cancel.terminal",)),
    "ignores-cancel-hint": ("cancel handling", ("chat-cancel-hint",), ("cancel.hint",)),
    "bad-error-body": ("error body", ("chat-invalid-body-missing-messages",), ("error.body",)),
    # no normative document fixes a code (issue 36): the code a case maps to is this suite's
    # recommendation, failed only when the run is strict (STRICT)
    "wrong-error-code": ("error body", ("chat-invalid-body-missing-messages",),
                         ("error.code-choice",)),
    "unsupported-op-accepted": ("error placement", ("chat-unsupported-operation",),
                                ("expect.unsupported-operation", "capability.not-claimed")),
    "wrong-usage-fields": ("usage shape", ("chat-usage-shape",), ("usage.shape", "event.schema")),
    "usage-twice": ("usage shape", ("chat-usage-shape",), ("usage.at-most-once",)),
    "capability-lies": ("capability document", ("capabilities-document",),
                        ("capability.agreement", "capability.document")),
    "schema-invalid-event": ("schema violations", ("chat-streaming-text",), ("event.schema",)),
    "unknown-event-type": ("schema violations", ("chat-streaming-text",), ("event.schema",)),
    "huge-event": ("schema violations", ("chat-streaming-text",), ("event.value-limit",)),
    "non-streaming-bad-body": ("schema violations", ("chat-non-streaming-body",), ("nonstreaming.body",)),
    "garbage-frames": ("wire mapping", ("chat-streaming-text",), ("event.decode", "wire.partial_result.json",
                                                                   "wire.partial_result.utf8")),
    "sse-framing": ("wire mapping", ("chat-streaming-text",), ("event.decode", "wire.partial_result.json")),
    "silence": ("liveness", ("chat-streaming-text",), ("timeout.silence",)),
    "flood": ("liveness", ("chat-streaming-text",), ("flood.max-events", "timeout.no-terminal")),
    # runs to completion: a valid answer past the total deadline the recipe expects beyond
    # the profile (a recommendation, so judged with --strict: STRICT), or (past the short case
    # timeout) no terminal at all — both name the ignored deadline
    "ignores-timeout": ("NNRP policy (timeout)", ("chat-timeout",),
                        ("timeout.total-deadline", "timeout.no-terminal")),
    "accepts-bad-wire": ("wire mapping (request)", ("wire-extra-frames", "wire-wrong-payload-kind"),
                         ("expect.invalid-submit",)),
    "extension-misuse": ("extension misuse", ("chat-streaming-text",), ("event.extra-field",)),
    # an extra field that collides with a profile field or a declared extension not in effect
    # is the profile's (issue 27); one that collides with nothing is extension-misuse above
    "profile-field-misplaced": ("extra field colliding", ("chat-streaming-text",), ("event.schema",)),
    "critical-extension-unselected": ("extra field colliding", ("chat-streaming-text",),
                                      ("event.schema",)),
    # operations in flight together on one session (issue 30): the concurrency recipes;
    # the neighbours' own terminal.kind fails too, so the kill is the rule naming the cause
    "cross-talk": ("multiplexing", ("concurrent-chat-mixed",), ("concurrency.cross-talk",)),
    "swapped-terminals": ("multiplexing", ("concurrent-chat-mixed",),
                          ("concurrency.terminal-swap",)),
    "cancel-ends-others": ("multiplexing", ("concurrent-chat-cancel-one",),
                           ("concurrency.neighbour-ended",)),
    "error-ends-neighbours": ("multiplexing", ("concurrent-chat-mixed",),
                              ("concurrency.neighbour-ended",)),
    # Level 2: responses.create
    "item-done-early": ("output-item lifecycle", ("responses-streaming-text",),
                        ("output-item.lifecycle",)),
    "delta-wrong-item": ("output-item lifecycle", ("responses-streaming-text",),
                         ("output-item.lifecycle",)),
    "tool-call-item-mismatch": ("output-item tool call", ("responses-tool-call-forced",),
                                ("output-item.tool-call",)),
    "responses-no-usage": ("responses usage event", ("responses-usage",), ("responses.usage-event",)),
    "responses-chat-body": ("responses body", ("responses-non-streaming-body",), ("responses.body",)),
    "responses-item-id-mismatch": ("responses body", ("responses-streaming-text",), ("responses.body",)),
    "responses-empty-push": ("responses body", ("responses-streaming-text",), ("responses.final-body",)),
    "responses-ignores-cancel": ("late events / cancel handling", ("responses-cancel-client",),
                                 ("cancel.late-event", "wire.partial_after_cancel",
                                  "wire.result_after_cancel", "cancel.unanswered")),
    # Level 3: models.list, embeddings.create
    "models-omit-served": ("models list", ("models-list",), ("models.agreement",)),
    "models-bad-body": ("models list", ("models-list",), ("models.body",)),
    "embeddings-missing-index": ("embeddings body", ("embeddings-shape",), ("embeddings.body",)),
    "embeddings-wrong-count": ("embeddings body", ("embeddings-shape",), ("embeddings.body",)),
    "embeddings-unequal-dims": ("embeddings body", ("embeddings-shape",), ("embeddings.body",)),
    "embeddings-reversed": ("embeddings batch order", ("embeddings-batch-order",),
                            ("embeddings.order",)),
}


#: input-handling defects (the example's input_faults.py): requests no fixed recipe sends, so
#: no fixed recipe names them; each is killed by a generated run (issue 37) -> the rules naming
#: it. (ignores-max-tokens also makes the strict fixed run fail timeout.total-deadline, and
#: invalid-deafens-session its next case timeout.silence: other rules, on innocent cases.)
GENERATED: dict[str, tuple[str, ...]] = {
    "seed-server-error": ("generated.server-error",),
    "multipart-server-error": ("generated.server-error",),
    "metadata-refused-unnamed": ("generated.refusal-unnamed",),
    "missing-model-accepted": ("generated.invalid-accepted",),
    "negative-max-tokens-accepted": ("generated.invalid-accepted",),
    "ignores-max-tokens": ("usage.max-tokens",),
    "ignores-stop": ("text.stop",),
    "split-multibyte": ("event.decode", "wire.partial_result.utf8"),
    "lone-surrogate": ("event.text-unicode",),
    "long-prompt-no-terminal": ("timeout.no-terminal", "timeout.silence"),
    "unknown-role-unanswered": ("timeout.silence",),
    "invalid-deafens-session": ("generated.session-serves-next",),
    "tool-choice-none-ignored": ("tool-choice.none",),
    "answer-cache-wrong-key": ("answer.id-reused",),
    "unknown-field-server-error": ("generated.server-error",),
    # issue 45 item 2: a request field's oracle each
    "ignores-max-completion-tokens": ("usage.max-tokens",),
    "stop-list-first-only": ("text.stop",),
    "n-ignored": ("choices.n",),
    "json-mode-ignored": ("response-format.json",),
    "responses-json-mode-ignored": ("response-format.json",),
    "usage-lost-with-user": ("usage.include-usage",),
    # issue 45 item 3: relations between a request and its repeats
    "temperature-zero-sampled": ("answer.repeatable",),
    "user-in-prompt": ("answer.user-neutral",),
    # ... and across sessions: each session alone is right (a repeat on a session of its own)
    "ids-per-session": ("answer.id-reused",),
    "seed-per-session": ("answer.repeatable",),
    # ... and operations in flight together on two sessions (a sequence's companion on
    # another session): each session alone is right
    "frame-id-registry": ("concurrency.cross-talk",),
    "requires-request-id": ("envelope.request-id-optional",),
    "forwards-nnrp-hints": ("envelope.hints-forwarded",),
}
#: generated defects of Level 2 or 3 operations: run against ``--levels 3`` with the manifest
#: claiming them (the others against Level 1, the budget a provider of chat runs)
GENERATED_LEVELS = {"responses-json-mode-ignored"}
#: the generated run of each: its size and its fixed seed (the same seed, the same requests)
GENERATE, SEED = "200", "1"

#: defects run with another manifest than their level's: the one declaring the critical
#: extension whose field the endpoint sends unselected
MANIFEST_FOR = {"critical-extension-unselected": EXAMPLE / "manifest-critical-extension.json"}

#: defects whose failed rules must be exactly their entry's: each extra-field reading is
#: told apart by its rule alone (a collision is event.schema, nothing else is)
EXACT = {"profile-field-misplaced", "critical-extension-unselected", "extension-misuse",
         # issue 30: each new rule alone names its defect
         "two-terminals", "tool-calls-shared-index", "body-tool-calls-disagree",
         # an operation's own checks see nothing wrong here (text.agreement is non-strict)
         "cross-talk", "swapped-terminals"}

#: registry defects with no entry above (the reasons are in the comment on DEFECTS)
UNKILLABLE: set[str] = set()

#: defects that break a recommendation, not the profile: caught when the run is strict.
#: Moved here from a default-run kill by issue 27 (only the profile's words are strict):
#: usage-twice (one usage summary is this project's reading), ignores-cancel-hint (the
#: profile never says the endpoint acts on nnrp.cancel_after_events), item-done-early,
#: delta-wrong-item, tool-call-item-mismatch (the profile has no output-item events) and
#: embeddings-reversed (a repeated input's vectors: model behaviour, a non-goal).
#: extension-misuse (an undeclared field: the profile closes no object) and huge-event (a
#: 4 MiB delta: the profile sets no sizes) moved too.
STRICT = {"ignores-timeout", "responses-no-usage", "responses-empty-push", "usage-twice",
          "ignores-cancel-hint", "item-done-early", "delta-wrong-item",
          "tool-call-item-mismatch", "embeddings-reversed", "extension-misuse", "huge-event",
          # the profile fixes neither (issue 30): recommendations
          "tool-calls-shared-index", "body-tool-calls-disagree",
          # the profile fixes no error code (issue 36): error.code-choice is ours
          "wrong-error-code",
          # no normative text fixes the terminal after a frame cancellation (issue 43): an
          # error drop answering the cancel is a reading; cancel.terminal recommends cancelled
          "cancel-wrong-drop",
          # the profile requires a usage and names no count (issue 43): usage.shape is ours
          "wrong-usage-fields"}


def recipe_path(stem: str) -> Path:
    """The one bundled recipe file ``STEM.yaml``, whatever its level folder."""
    found = sorted(RECIPES.glob(f"level*/{stem}.yaml"))
    assert len(found) == 1, f"recipe {stem!r}: {[str(p) for p in found] or 'not found'}"
    return found[0]


def above_level1(defect: str) -> bool:
    """The defect's recipes are Level 2 or 3: the endpoint must serve those levels."""
    return any(recipe_path(r).parent.name != "level1" for r in DEFECTS[defect][1])


@dataclass
class Run:
    defect: str | None
    levels: bool
    exit_code: int | None
    rules: set[str]
    seconds: float
    detail: str = ""


def _name(defect: str | None, levels: bool) -> str:
    return (defect or "correct") + ("-levels" if levels else "")


def _start(defect: str | None, levels: bool, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    out = tmp / f"ep-{_name(defect, levels)}.out"
    cmd = [sys.executable, str(EXAMPLE / "endpoint.py"), "--listen", "127.0.0.1:0"]
    if defect:
        cmd += ["--defect", defect]
    if levels:
        cmd += ["--levels", "3"]
    with out.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = out.read_text(errors="replace").partition("\n")
        if line[1] and line[0].startswith("LISTENING "):
            return proc, line[0].split()[1]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"endpoint {defect} did not start")


def _run(defect: str | None, tmp: Path, *, levels: bool = False, strict: bool = False) -> Run:
    """One CLI run: a defect over its recipes, or the correct endpoint (``defect`` None) over
    every bundled recipe; ``levels`` serves and claims Levels 1-3."""
    recipes = DEFECTS[defect][1] if defect else ()
    t0 = time.monotonic()
    try:
        proc, address = _start(defect, levels, tmp)
    except RuntimeError as exc:
        return Run(defect, levels, None, set(), 0.0, str(exc))
    results = tmp / f"results-{_name(defect, levels)}.json"
    manifest = MANIFEST_FOR.get(defect or "", MANIFEST_LEVELS if levels else MANIFEST)
    cmd = [*CLI, "run", "--target", address, "--manifest", str(manifest),
           "--results", str(results), "--timeout", CASE_TIMEOUT_S,
           # the silent variants teach no model, which would be a setup error of its own
           "--model", "minimal-model",
           *(["--strict"] if strict or defect in STRICT else [])]
    for r in recipes:
        cmd += ["--recipes", str(recipe_path(r))]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=RUN_LIMIT_S, cwd=tmp)
        code = done.returncode
        text = (done.stdout.decode(errors="replace")[-3000:]
                + done.stderr.decode(errors="replace")[-1500:])  # a setup error is on stderr
    except subprocess.TimeoutExpired:
        code, text = None, f"the run did not finish within {RUN_LIMIT_S}s"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    rules: set[str] = set()
    if results.exists():
        doc = json.loads(results.read_text())
        # only failed findings: a recommendation's note on a case another rule failed is not
        # the kill (the STRICT defects' rules fail when the run is strict)
        rules = {f["rule"] for r in doc["results"] if r["outcome"] == "failed"
                 for f in r.get("diagnostics", {}).get("findings", [])
                 if f.get("level", "failed") == "failed"}
        if not defect:
            text += "\n" + json.dumps(_not_passed(doc), indent=1)
    return Run(defect, levels, code, rules, time.monotonic() - t0, text)


def _not_passed(doc: dict) -> list[dict]:
    return [{"id": r["id"], "outcome": r["outcome"], "message": r.get("message")}
            for r in doc["results"] if r["outcome"] != "passed"]


@pytest.mark.timeout(900)  # ~40 endpoint runs, each bounded by RUN_LIMIT_S, 4 at a time
def test_kill_rate(tmp_path: Path) -> None:
    names = sorted(DEFECTS)
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda d: _run(d, tmp_path, levels=bool(d) and above_level1(d)),
                             [None, *names]))
    correct, defective = runs[0], runs[1:]
    killed = []
    lines = []
    for run in defective:
        cls, _recipes, want = DEFECTS[run.defect]
        hit = run.exit_code == 1 and (run.rules == set(want) if run.defect in EXACT
                                      else bool(run.rules & set(want)))
        killed += [run.defect] if hit else []
        lines.append(f"  {'KILLED ' if hit else 'SURVIVED'} {run.defect:26s} {cls:32s} exit={run.exit_code} "
                     f"rules={sorted(run.rules)} ({run.seconds:.1f}s)")
        if not hit:  # what the run said: a survivor is diagnosable from the test's own output
            lines.append("    " + run.detail[-1500:].replace("\n", "\n    "))
    classes = {DEFECTS[d][0] for d in killed}
    print(f"\nkill rate: {len(killed)}/{len(defective)} defects killed by the rule naming them "
          f"({100 * len(killed) / len(defective):.0f}%), {len(classes)} defect classes; correct endpoint: "
          f"exit={correct.exit_code} failed rules={sorted(correct.rules)}")
    print("\n".join(lines))
    assert correct.exit_code == 0, correct.detail
    assert len(defective) >= 15
    assert killed == [r.defect for r in defective], "\n".join(
        line for line in lines if "SURVIVED" in line or line.startswith("    "))


def _results(tmp: Path, run: Run) -> dict:
    return json.loads((tmp / f"results-{_name(run.defect, run.levels)}.json").read_text())


@pytest.mark.timeout(300)
def test_correct_endpoint_passes_every_level(tmp_path: Path) -> None:
    """With ``--levels 3`` and the manifest claiming Levels 1-3, the correct endpoint passes
    every bundled recipe of the three levels, strictly: no recipe is skipped as not claimed,
    and no recommendation is left unmet."""
    run = _run(None, tmp_path, levels=True, strict=True)
    assert run.exit_code == 0, run.detail
    doc = _results(tmp_path, run)
    outcomes = {r["id"]: r["outcome"] for r in doc["results"]}
    for level in (1, 2, 3):
        stems = sorted(p.stem for p in (RECIPES / f"level{level}").glob("*.yaml"))
        ids = [i for i in outcomes if i.startswith(f"level{level}.")]
        assert len(ids) == len(stems), (level, sorted(ids), stems)
    assert set(outcomes.values()) == {"passed"}, _not_passed(doc)


def test_every_defect_has_a_kill_entry() -> None:
    """A defect added to the example's registry is judged here, or said to be unkillable."""
    done = subprocess.run([sys.executable, str(EXAMPLE / "endpoint.py"), "--list-defects"],
                          capture_output=True, text=True, timeout=60, check=True)
    registry = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert registry - UNKILLABLE == set(DEFECTS) | set(GENERATED)
    assert not set(DEFECTS) & set(GENERATED)
    for defect in DEFECTS:
        above_level1(defect)  # every recipe stem names exactly one bundled recipe


@dataclass
class GeneratedRun:
    defect: str | None
    exit_code: int | None
    fixed_rules: set[str]
    generated_rules: set[str]
    seconds: float
    doc: dict
    detail: str = ""


def _failed_rules(results: list[dict]) -> set[str]:
    return {f["rule"] for r in results if r["outcome"] == "failed"
            for f in r.get("diagnostics", {}).get("findings", [])
            if f.get("level", "failed") == "failed"}


def _run_generated(defect: str | None, tmp: Path) -> GeneratedRun:
    """Every fixed Level 1 recipe and GENERATE generated requests from SEED, strictly, in one
    CLI run against the endpoint with ``defect`` (or the correct one)."""
    t0 = time.monotonic()
    levels = defect in GENERATED_LEVELS
    proc, address = _start(defect, levels, tmp)
    # a folder per run: its saved failures (generated-recipes/ beside the results) share
    # their case ids with the other runs' (one seed), and the replay below reads one of them
    results = tmp / f"generated-{defect or 'correct'}" / "case-results.json"
    results.parent.mkdir()
    # short limits keep the silent defects' runs short; the correct endpoint is never silent,
    # so its run (the no-false-failure half) gets wide ones at no cost: on a loaded machine a
    # correct answer once took over 0.5 s to start (timeout.silence at load 11)
    idle, total = ("0.5", CASE_TIMEOUT_S) if defect else ("5", "20")
    cmd = [*CLI, "run", "--target", address, "--manifest",
           str(MANIFEST_LEVELS if levels else MANIFEST), "--results",
           str(results), "--timeout", total, "--idle-timeout", idle, "--model",
           "minimal-model", "--strict", "--recipes", str(RECIPES / "level1"),
           "--generate", GENERATE, "--seed", SEED]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=RUN_LIMIT_S, cwd=tmp)
        code: int | None = done.returncode
        text = done.stdout.decode(errors="replace")[-3000:] + done.stderr.decode(
            errors="replace")[-1500:]
    except subprocess.TimeoutExpired:
        code, text = None, f"the run did not finish within {RUN_LIMIT_S}s"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    doc = json.loads(results.read_text()) if results.exists() else {"results": []}
    cases = doc["results"]
    fixed = [r for r in cases if not r["id"].startswith("generated.")]
    generated = [r for r in cases if r["id"].startswith("generated.")]
    return GeneratedRun(defect, code, _failed_rules(fixed), _failed_rules(generated),
                        time.monotonic() - t0, doc, text)


@pytest.mark.timeout(900)
def test_generated_requests_kill_what_no_recipe_names(tmp_path: Path) -> None:
    """Each input-handling defect: the fixed recipes' cases never fail with its rules, the
    generated cases of the same run (seed SEED) do; the correct endpoint passes all of them,
    strictly (no false failure); and a generated failure replays from its saved recipe file
    alone (its reproduce command)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda d: _run_generated(d, tmp_path), [None, *GENERATED]))
    correct, defective = runs[0], runs[1:]
    lines, killed = [], []
    for run in defective:
        want = set(GENERATED[run.defect or ""])
        hit = run.exit_code == 1 and bool(run.generated_rules & want) \
            and not run.fixed_rules & want
        killed += [run.defect] if hit else []
        lines.append(f"  {'KILLED ' if hit else 'SURVIVED'} {run.defect:30s} fixed recipes: "
                     f"{sorted(run.fixed_rules & want) or 'not named'}; generated: "
                     f"{sorted(run.generated_rules)} ({run.seconds:.1f}s)")
        if not hit:
            lines.append("    " + run.detail[-1500:].replace("\n", "\n    "))
    generated = sum(r["id"].startswith("generated.") for r in correct.doc["results"])
    print(f"\ngenerated kill rate: {len(killed)}/{len(defective)} input-handling defects "
          f"killed by {GENERATE} generated requests (seed {SEED}), none named by a fixed "
          f"recipe; correct endpoint: exit={correct.exit_code}, {generated} generated cases, "
          f"failed rules={sorted(correct.fixed_rules | correct.generated_rules)} "
          f"({correct.seconds:.1f}s)")
    print("\n".join(lines))
    assert correct.exit_code == 0, correct.detail
    assert generated == int(GENERATE)
    assert len(defective) >= 10
    assert killed == list(GENERATED), "\n".join(lines)
    # replay: the saved recipe file of a failure, alone, fails the same way
    stop = next(r for r in runs if r.defect == "ignores-stop")
    case = next(r for r in stop.doc["results"] if r["id"].startswith("generated.")
                and r["outcome"] == "failed")
    argv = shlex.split(case["diagnostics"]["reproduce"])
    assert argv[argv.index("--recipes") + 1] == case["diagnostics"]["generated"]["recipe_file"]
    proc, address = _start("ignores-stop", False, tmp_path)
    try:
        argv[argv.index("--target") + 1] = address
        done = subprocess.run([*CLI, *argv[1:]], capture_output=True, timeout=RUN_LIMIT_S,
                              cwd=tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    replayed = json.loads(Path(argv[argv.index("--results") + 1]).read_text())["results"]
    assert done.returncode == 1 and [r["id"] for r in replayed] == [case["id"]]
    assert "text.stop" in _failed_rules(replayed), replayed
