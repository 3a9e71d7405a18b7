"""A run's generated cases: drawing them from the seed, planning them as recipes, and what
happens after each one ran (the session probe after an invalid request, shrinking and saving a
failure). The entry points are described in ``generate/__init__.py``."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from nnrp_conformance import contract, rules
from nnrp_conformance.checks.generated import session_served_next
from nnrp_conformance.checks.model import verdict_of
from nnrp_conformance.generate.json_mode import with_json_mode
from nnrp_conformance.generate.recipe_files import case_id_of, recipe_data, recipe_of, save_recipe
from nnrp_conformance.generate.repeats import related
from nnrp_conformance.generate.shrink import shrink
from nnrp_conformance.generate.strategies import (
    BODIES,
    FAMILY_INVALID,
    FAMILY_VALID,
    Claim,
    Draft,
    Material,
    draft_of,
    material,
    slots,
)
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipe_file

__all__ = ["SAVE_DIR", "GeneratedRun", "claims_of", "draw", "generated_cases", "settle",
           "still_the_failure", "with_models"]

#: seeds drawn when none is given: below 2**32, short enough to type
SEED_RANGE = 2**32
#: beside the case results: where a shrunk failure is saved without --nnrp-generate-save
SAVE_DIR = "generated-recipes"
#: shrinking a failure whose case drops or silences the session: each try that still fails
#: waits for a silence, so the tries get this many seconds in all ...
DROPPING_SHRINK_S = 10.0
#: ... and each waits at most this long for a frame (the case already showed the silence)
DROPPING_TRY_IDLE_S = 1.0
#: the key of ``GeneratedRun.shrunk`` for the failures whose case drops the session
_DROPS_KEY = frozenset({("session_dropped", "")})
_PROBE_BODY = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
_SHOWN_LEVELS = (rules.LEVEL_FAILED, rules.LEVEL_NON_STRICT)


@dataclass
class GeneratedRun:
    """What a run generated: its seed, the drafts by case id, where failures are saved."""

    seed: int
    count: int
    model: str
    save_dir: Path
    drafts: dict[str, Draft] = field(default_factory=dict)
    saved: list[Path] = field(default_factory=list)
    #: the rules of each failure shrunk so far -> its case: a later case failing the same
    #: rules is saved as drawn, not shrunk again (schemathesis reports a check's failure once);
    #: every failure whose case drops the session counts as one
    shrunk: dict[frozenset[tuple[str, str]], str] = field(default_factory=dict)


def claims_of(manifest: Any, capabilities: dict[str, Any] | None, level: int) -> list[Claim]:
    """The operations a run may generate for: claimed by the manifest (and listed by the
    capability document when there is one), at the run's level or below, with the features
    the manifest claims for each."""
    listed = None
    if isinstance(capabilities, dict) and isinstance(capabilities.get("operations"), list):
        listed = {op.get("name") for op in capabilities["operations"] if isinstance(op, dict)}
    out = []
    for op in BODIES:
        caps = manifest.capabilities_for(op)
        if contract.operation_capability(op) not in caps or contract.OPERATION_LEVELS[op] > level:
            continue
        if listed is not None and op not in listed:
            continue
        out.append(Claim(op, streaming="api.streaming" in caps,
                         tool_calls="api.tool_calls" in caps,
                         cancellation="api.cancellation" in caps))
    return out


@contextlib.contextmanager
def _without_local_constants() -> Iterator[None]:
    """hypothesis (since 6.131) mixes literals of the "local" modules loaded in the process
    (any module outside site-packages and the standard library: an editable install of this
    suite, a provider's conftest, the test files' helpers) into what it draws. The same seed
    then drew other requests under pytest than under the CLI (measured: case 3 of 10 already
    differed). For the draw, hypothesis sees no local constant (its own global ones stay),
    so the requests depend only on the seed and what the run claims."""
    # lazy on purpose: an internal module of hypothesis, present only in the versions that
    # collect local constants (absent: nothing to turn off)
    from hypothesis.internal.conjecture import providers

    found = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if found is None or cache is None:
        yield
        return
    empty = getattr(providers, "Constants")()  # noqa: B009 (not exported: mypy)
    # setattr: mypy refuses an assignment to a module's function
    setattr(providers, "_get_local_constants", lambda: empty)  # noqa: B010
    cache.cache.clear()  # it keeps the local constants already allowed per kind of choice
    try:
        yield
    finally:
        setattr(providers, "_get_local_constants", found)  # noqa: B010
        cache.cache.clear()


def draw(claims: Sequence[Claim], model: str, count: int, seed: int) -> list[Draft]:
    """``count`` drafts drawn by hypothesis from ``seed``: the same seed, the same drafts."""

    drawn: list[Material] = []

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), print_blob=False)
    @hypothesis_seed(seed)
    @given(material(claims, model))
    def collect(stuff: Material) -> None:
        drawn.append(stuff)

    with _without_local_constants():
        collect()
    # the i-th example drawn fills the i-th slot; some valid Responses ones ask for JSON mode,
    # and some valid ones then repeat an earlier one
    return related(with_json_mode([draft_of(slot, stuff, claims) for slot, stuff in zip(
        slots(claims, count, seed), drawn, strict=False)], seed), seed)


def _case_id(draft: Draft, seed: int, index: int) -> str:
    return case_id_of(draft.family, draft.operation, seed, index)


def _plan(core: Any, datas: Sequence[dict[str, Any]], where: Path) -> list[Any]:
    recipes = [recipe_of(d, where / f"{d['id']}.yaml") for d in datas]
    plan = build_plan(recipes, core.manifest, model_id=core.model_id,
                      params=dict(core.options.params), extensions=tuple(core.options.extensions),
                      level=core.plan.level)
    return list(plan.cases)


def generated_cases(core: Any) -> list[Any]:
    """The run's generated cases, planned (``core.generated`` keeps their drafts)."""
    options = core.options
    if options.seed is None:  # the faces print it: the same seed draws the same cases
        options.seed = secrets.randbelow(SEED_RANGE)
    seed = options.seed
    model = core.model_id or contract.PLACEHOLDER_MODEL_ID
    save_dir = options.generate_save or options.artifacts().results.parent / SAVE_DIR
    run = GeneratedRun(seed, options.generate, model, save_dir)
    core.generated = run
    claims = claims_of(core.manifest, core.capabilities, core.plan.level)
    if not claims:
        return []
    datas = []
    models = dict(getattr(core.plan, "models", None) or {})
    for index, drawn in enumerate(draw(claims, model, options.generate, seed)):
        draft = with_models(drawn, model, models)
        case_id = _case_id(draft, seed, index)
        run.drafts[case_id] = draft
        datas.append(recipe_data(draft, case_id=case_id, seed=seed, index=index, model=model))
    return _plan(core, datas, save_dir)


def with_models(draft: Draft, model: str, models: Mapping[str, str]) -> Draft:
    """``draft`` (drawn with the run-wide ``model``) sent to the model the run chose for each
    of its operations (``models``: ``--nnrp-model OP=ID`` or the documents, model_choice.py):
    an embeddings request goes to the embeddings model, not the chat one."""
    def moved(d: Draft) -> Draft:
        own = models.get(d.operation)
        if own is None or own == model or d.body.get("model") != model:
            return d
        return dataclasses.replace(d, body={**d.body, "model": own})
    return dataclasses.replace(moved(draft),
                               companions=tuple(moved(c) for c in draft.companions))


def _run(core: Any, run: GeneratedRun, draft: Draft, case_id: str,
         idle: float | None = None) -> Any:
    index = int(case_id.rsplit("-", 1)[-1])
    data = recipe_data(draft, case_id=case_id, seed=run.seed, index=index, model=run.model)
    case = _plan(core, [data], run.save_dir)[0]
    return core.run_case(case, force=True, idle_timeout=idle)


def _drops_session(result: Any) -> bool:
    """The case dropped its session or left an operation on it silent (``run_cases.py``), or,
    an invalid request, its session's next operation was (``_probe``)."""
    diag = result.diagnostics
    return bool(diag.get("session_dropped") or diag.get("left_open")
                or (diag.get("session_probe") or {}).get("silenced"))


def _signature(result: Any) -> set[tuple[str, str]]:
    return {(f.rule, f.level) for f in result.verdict.findings if f.level in _SHOWN_LEVELS}


def still_the_failure(seen: set[tuple[str, str]], target: set[tuple[str, str]]) -> bool:
    """Whether a shrinking try shows the drawn request's failure: some of its findings, and
    none it did not have (a try that dropped ``stream`` and met another rule is another
    failure: the saved request would carry a finding the drawn one never had)."""
    return bool(seen & target) and seen <= target


def _probe(core: Any, run: GeneratedRun, case: Any, result: Any,
           idle: float | None = None) -> Any:
    """The invalid request's session serves the next operation (a one-token chat)."""
    draft = Draft(FAMILY_VALID, contract.OP_CHAT_COMPLETIONS_CREATE,
                  {"model": run.model, **_PROBE_BODY})
    probe = _run(core, run, draft, f"{case.id}.next-0000", idle)
    if probe.diagnostics.get("not_run"):
        return result  # the run-level rule (endpoint.unresponsive) already says it
    finding = session_served_next(case.id, probe.terminal,
                                  probe.diagnostics.get("terminal_delivery") or "nothing")
    result.diagnostics["session_probe"] = {
        "terminal": probe.terminal, "outcome": probe.outcome,
        "silenced": _drops_session(probe)}
    if finding is None:
        return result
    findings = [*result.verdict.findings, finding]
    verdict = verdict_of(case.id, result.terminal, findings, len(result.events))
    return dataclasses.replace(result, verdict=verdict, outcome=verdict.outcome)


def settle(core: Any, case: Any, result: Any) -> tuple[Any, Any]:
    """After ``case`` ran: the session probe (invalid family) and, for a failed or non-strict
    generated case, the shrunk request, saved; returns the case (its recipe path the saved
    file) and the result to report."""
    run: GeneratedRun | None = getattr(core, "generated", None)
    draft = run.drafts.get(case.id) if run is not None else None
    if run is None or draft is None or result.outcome == contract.OUTCOME_SKIPPED \
            or result.diagnostics.get("not_run"):
        return case, result  # not run (endpoint.unresponsive): nothing to shrink
    if draft.family == FAMILY_INVALID:
        result = _probe(core, run, case, result)
    target = _signature(result)
    if not target:
        return case, result

    drops = _drops_session(result)
    idle = DROPPING_TRY_IDLE_S if drops else None

    def still_fails(candidate: Draft) -> Any:
        seen = _run(core, run, candidate, case.id, idle)
        if draft.family == FAMILY_INVALID:
            seen = _probe(core, run, case, seen, idle)
        return seen if still_the_failure(_signature(seen), target) else None

    # every case that drops the session shows the one defect, whatever rules its silence
    # fails: it is shrunk once (each try waits for a silence), the later ones saved as drawn
    key = _DROPS_KEY if drops else frozenset(target)
    first = run.shrunk.get(key)
    note = None
    if draft.repeats is not None:
        # a repeat is judged against the answer of the case it repeats: a shrinking try sends
        # another body, which no relation follows (a try that kept only its other findings,
        # a twin difference say, replaced the relation's failure); saved as drawn
        small, small_result, runs = draft, result, 0
    elif first is None:
        run.shrunk[key] = case.id
        found = shrink(draft, result, still_fails,
                       seconds=DROPPING_SHRINK_S if drops else None)
        small, small_result, runs = found.draft, found.result, found.runs
        if drops and found.stopped:
            note = (f"shrinking stopped after {runs} tries / {found.seconds:g} s: the case "
                    "drops the session")
        elif drops:
            note = f"shrunk in {runs} tries / {found.seconds:g} s; the case drops the session"
    else:
        small, small_result, runs = draft, result, 0
    data = recipe_data(small, case_id=case.id, seed=run.seed,
                       index=int(case.id.rsplit("-", 1)[-1]), model=run.model, note=note)
    path = save_recipe(data, run.save_dir)
    load_recipe_file(path)  # a saved failure always reads back as a valid recipe
    run.saved.append(path)
    request = data["request"]
    small_result.diagnostics["generated"] = {
        **data["generated"], "shrink_runs": runs, "recipe_file": str(path),
        "shrunk": first is None and draft.repeats is None, "same_rules_as": first,
        "shrink_note": note,
        "request": request, "original_request": json.loads(json.dumps(
            recipe_data(draft, case_id=case.id, seed=run.seed, index=0,
                        model=run.model)["request"]))}
    recipe = dataclasses.replace(case.recipe, path=path, data=data)
    return dataclasses.replace(case, recipe=recipe), small_result
