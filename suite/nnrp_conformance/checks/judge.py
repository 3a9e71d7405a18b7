"""The judge: which checks run for a case and how their findings become one
:class:`Verdict` (the worst finding's level, rules.py), the recipe's declared surplus over
the profile (``beyond_profile``), and :func:`judge_recorded` for answers recorded outside a
case (the release smoke), so a stream is never judged two ways."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nnrp_conformance import authority, contract, rules
from nnrp_conformance.checks.bodies import check_nonstreaming
from nnrp_conformance.checks.cancel import check_cancel, check_cancel_reason
from nnrp_conformance.checks.capability import (
    check_capability_document,
    check_claims,
    discovery_missing,
    judge_missing_discovery,
)
from nnrp_conformance.checks.context import Context, type_of
from nnrp_conformance.checks.diagnostics_events import set_aside_diagnostics
from nnrp_conformance.checks.discovery import DISCOVERY_CHECKS
from nnrp_conformance.checks.errors import check_errors
from nnrp_conformance.checks.exercise import KEY as NOT_EXERCISED
from nnrp_conformance.checks.exercise import judge_not_exercised, why_not_exercised
from nnrp_conformance.checks.generated import check_stop, check_text_unicode, judge_generated
from nnrp_conformance.checks.input_errors import check_error_about_input
from nnrp_conformance.checks.model import Finding, Observation, Verdict, verdict_of
from nnrp_conformance.checks.relations import RELATION_CHECKS
from nnrp_conformance.checks.request_fields import REQUEST_FIELD_CHECKS
from nnrp_conformance.checks.responses import RESPONSES_CHECKS
from nnrp_conformance.checks.sequence import (
    check_expected,
    check_text_order,
    check_tool_calls,
    check_usage,
    check_usage_shape,
)
from nnrp_conformance.checks.stream import check_decode, check_exception, check_schema, check_wire
from nnrp_conformance.checks.terminal import check_after_terminal, check_terminal, check_timeout
from nnrp_conformance.checks.tool_call_body import TOOL_CALL_BODY_CHECKS
from nnrp_conformance.checks.tool_choice import TOOL_CHOICE_CHECKS

if TYPE_CHECKING:
    from nnrp_conformance.manifest import Manifest
    from nnrp_conformance.planner import PlannedCase


def check_capability_case(ctx: Context) -> None:
    """The discovery operation's answer is a capability document to judge."""
    if ctx.case.operation == contract.OP_CAPABILITIES_GET:
        check_capability_document(ctx)


#: the check names a recipe may list (``checks:``). Every check runs on what it applies to
#: in every case (issue 27 item 6: a recipe adds expectations, it never switches judgement
#: off), so a named check only documents what the recipe is about.
NAMED_CHECKS: dict[str, Callable[[Context], None]] = {
    "capability-document": check_capability_case,
    "usage-shape": check_usage_shape,
    "text-order": check_text_order,
}


_ALWAYS: tuple[Callable[[Context], None], ...] = (
    check_wire,
    check_exception,
    check_decode,
    check_schema,
    check_terminal,
    check_after_terminal,
    check_expected,
    check_tool_calls,
    check_usage,
    check_errors,
    check_error_about_input,
    check_nonstreaming,
    check_cancel,
    check_cancel_reason,
    check_claims,
    check_timeout,
    check_capability_case,
    check_usage_shape,
    check_text_order,
    *RELATION_CHECKS,
    *TOOL_CALL_BODY_CHECKS,
    *TOOL_CHOICE_CHECKS,
    *REQUEST_FIELD_CHECKS,
    *RESPONSES_CHECKS,
    *DISCOVERY_CHECKS,
    check_stop,
    check_text_unicode,
)
#: the checks that judge only what a recipe expects of its exercise (checks/exercise.py): not
#: run when the exercise did not happen
_ABOUT_THE_EXERCISE = frozenset({check_expected})


def judge(case: PlannedCase, obs: Observation, *, manifest: Manifest | None = None,
          capability_document: dict[str, Any] | None = None, strict: bool = False,
          capability_file: str | None = None) -> Verdict:
    """Run every always-on check and the case's named checks. The verdict is the worst
    finding's level (rules.py); only a ``failed`` finding fails the case, and ``strict``
    makes every recommendation a failure. ``capability_file`` names the document file the
    provider gave, judged when the endpoint has no discovery operation."""
    ctx = Context(case, obs, manifest, capability_document, strict=strict)
    ctx.capability_file = capability_file
    if discovery_missing(ctx):
        judge_missing_discovery(ctx)
        return _verdict(ctx)
    set_aside_diagnostics(ctx)  # before anything reads the stream (its module doc)
    exercise = why_not_exercised(case, obs)
    if exercise is not None:
        obs.extra[NOT_EXERCISED] = exercise
    for check in _ALWAYS:
        if exercise is not None and check in _ABOUT_THE_EXERCISE:
            continue  # the recipe's expectations describe what did not happen
        check(ctx)
    for name in case.checks or ():
        if name not in NAMED_CHECKS:  # the named ones already ran above
            ctx.fail("recipe.unknown-check", f"recipe asks for unknown check {name!r} "
                     f"(known: {', '.join(sorted(NAMED_CHECKS))})")
    judge_generated(ctx)
    judge_beyond_profile(ctx)
    judge_not_exercised(ctx)
    return _verdict(ctx)


def judge_beyond_profile(ctx: Context) -> None:
    """A recipe that expects more than the profile (``beyond_profile``): a valid answer, ended
    by the endpoint's own terminal of any kind, that misses only the recipe's expectations is
    judged once, under the recipe's recommendation rule (non-strict unless strict), with the
    recipe's reading. Each element already carries its own authority (authority.py), so a
    surplus element is non-strict whatever else the case found; this only words the verdict
    and softens a strict element the surplus made unreachable. (An expired
    ``nnrp.timeout_ms`` may end in an error of any family, a deadline drop or a cancel; an
    ignored hint in a full answer: docs/verdicts.md#readings.)"""
    beyond = getattr(ctx.case, "beyond_profile", None)
    if not beyond or ctx.obs.terminal_kind is None:
        return
    expected = authority.expectation_rules(ctx.case.expect)
    # only the profile's own failures decide (a recommendation failed by --strict stays as it
    # is, and never turns the recipe's surplus back into a profile failure)
    failed = [f for f in ctx.findings if f.level == rules.LEVEL_FAILED
              and (rule := rules.lookup(f.rule)) is not None and rule.tag == rules.TAG_PROFILE]
    if any(f.rule not in expected for f in failed):
        return
    mine = [f for f in ctx.findings if f.rule in expected
            and (f in failed or f.rule == beyond["rule"])]
    if not mine:
        return
    ctx.findings = [f for f in ctx.findings if f not in mine]
    how = "" if ctx.obs.terminal_kind == ctx.case.expected_terminal \
        else f" (it expects the {ctx.case.expected_terminal} terminal)"
    ctx.fail(beyond["rule"], f"the endpoint {ending(ctx.obs)}: a valid profile answer, not what "
             f"this recipe expects beyond the profile{how}: {beyond['reading']}",
             index=ctx.obs.terminal_index, expected=ctx.case.expected_terminal,
             seen=ctx.obs.terminal_kind)


def ending(obs: Observation) -> str:
    """How the endpoint ended an operation, in words: the terminal and what it carried."""
    n = len(obs.events)
    term = obs.terminal_event
    kind = type_of(term)
    if kind == contract.EV_CANCELLED:
        return f"stopped after {n} event(s) with response.cancelled (reason " \
               f"{term.get('reason')!r})"
    if kind == contract.EV_ERROR:
        err = term.get("error") if isinstance(term.get("error"), dict) else {}
        return f"ended after {n} event(s) with response.error (type {err.get('type')!r}, code " \
               f"{err.get('code')!r})"
    if kind == contract.EV_COMPLETED:
        return f"completed the answer ({n} event(s), response.completed)"
    how = obs.extra.get("drop_reason") or obs.extra.get("delivery") or "no profile event"
    return f"ended after {n} event(s) with a {obs.terminal_kind} terminal without a profile " \
           f"body ({how})"


def _verdict(ctx: Context) -> Verdict:
    return verdict_of(ctx.case.id, ctx.obs.terminal_kind, ctx.findings, len(ctx.obs.events))


@dataclass(frozen=True)
class _RecordedCase:
    """The case-shaped input of :func:`judge_recorded`: a recorded answer has no recipe."""

    id: str
    expected_terminal: str | None
    operation: str = contract.OP_CHAT_COMPLETIONS_CREATE
    envelope: Any = None
    expect: Any = None
    extensions: Any = None
    cancel_after_events: int | None = None
    checks: tuple[str, ...] = ()


#: the always-on checks that need no recipe: what any recorded answer must meet (the usage
#: counts, usage.shape, are judged here as they were when the event schema held them)
_RECORDED: tuple[Callable[[Context], None], ...] = (
    check_schema, check_terminal, check_after_terminal, check_tool_calls, check_usage,
    check_usage_shape, check_errors,
)


def judge_recorded(events: Any, terminal: str | None, *, what: str = "recorded answer",
                   manifest: Manifest | None = None, strict: bool = True) -> list[Finding]:
    """Judge a recorded event list (partials, the terminal event, anything after it) with
    the same checks as a case: the release smoke consumes these findings, so the smoke and
    the case verdicts can never disagree on one stream. Strict by default: the release gate
    holds the reference adapter to this project's recommendations too."""
    seq = [e for e in events] if isinstance(events, list) else []
    first = next((i for i, e in enumerate(seq) if type_of(e) in contract.TERMINAL_EVENT_TYPES),
                 None)
    obs = Observation(events=seq if first is None else seq[:first],
                      terminal_kind=terminal if terminal in contract.TERMINALS else None,
                      terminal_event=None if first is None else seq[first])
    obs.raw_events = [None] * len(obs.events)
    if first is not None and first + 1 < len(seq):
        obs.extra["late_events"] = seq[first + 1:]
    case = _RecordedCase(what, terminal)
    ctx = Context(case, obs, manifest, None, strict=strict)  # type: ignore[arg-type]
    for check in _RECORDED:
        check(ctx)
    return ctx.findings
