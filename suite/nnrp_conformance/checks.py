"""Judgement: the verdict of one case, computed from what the suite itself observed.

Owns every conformance check applied to an observed operation (each a small function with a
stable rule id) and :func:`judge`, which runs them and builds the :class:`Verdict`. Nothing
here trusts the endpoint's self-report: the input is the decoded traffic the suite received
(:class:`Observation`), the planned case and, for agreement checks, the manifest.

Always-on checks (rule ids): ``wire.*`` (the client's wire findings), ``event.decode``,
``event.schema``, ``terminal.exactly-once``, ``terminal.kind``, ``terminal.after``,
``sequence.expected``, ``order.tool-call``, ``tool-call.arguments``, ``usage.at-most-once``,
``error.body``, ``error.code``, ``nonstreaming.single-result``, ``nonstreaming.body``,
``cancel.not-sent``, ``cancel.unanswered``, ``cancel.late-event``, ``cancel.hint``, ``capability.not-claimed``,
``timeout.silence``, ``timeout.no-terminal``, ``flood.max-events``.
Named checks a recipe opts into with ``checks: [...]``: ``capability-document``
(``capability.document``, ``capability.agreement``), ``usage-shape`` (``usage.shape``),
``text-order`` (``order.text-index``).

Matching ``expect.events`` (stricter than upstream, §11.C): one forward cursor over the
observed sequence (partial events, then the terminal event). For each entry, the events of
its type at or after the cursor that contain ``fields`` (recursive subset; arrays match
element-wise as a prefix; scalars equal, ``true`` is not ``1``) are counted; at least
``min_count`` (default 1, or 0 when ``optional``) are needed and at most ``max_count`` of
that type may follow the cursor. The cursor then moves past the ``min_count``-th match, or
past the first match of an optional entry that is present, so optional entries are order-
and field-checked too.

Extension fields (spec §7): a top-level event field named after a manifest extension
(``name``, ``name.*``, or ``name`` with dots as underscores) is ignored by the schema check
when the extension is non-critical, or critical and selected for the case; so non-critical
extension fields never change a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract, rules
from nnrp_conformance.relations import RELATION_CHECKS

if TYPE_CHECKING:
    from nnrp_conformance.manifest import Manifest
    from nnrp_conformance.planner import PlannedCase

__all__ = [
    "NAMED_CHECKS",
    "Finding",
    "Observation",
    "Verdict",
    "json_contains",
    "judge",
    "judge_recorded",
]

SPEC = contract.SCHEMA_VERSION
#: a top-level event field no profile field collides with, used for diagnostics by other
#: implementations: a recommendation (event.diagnostics-field), not a schema failure
_DIAGNOSTICS_FIELD = "diagnostics"
_SHOW = 400  # characters of event JSON quoted in a finding


@dataclass(frozen=True)
class Finding:
    """One broken rule: stable rule id, what went wrong, where, expected vs seen, citation."""

    rule: str
    message: str
    event_index: int | None = None
    expected: Any = None  # for a non-strict finding: the recommended value
    seen: Any = None
    spec: str = ""
    level: str = rules.LEVEL_FAILED  # failed | non-strict | informational (rules.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        at = f" (event #{self.event_index})" if self.event_index is not None else ""
        cite = f" — {self.spec}" if self.spec else ""
        lv = "" if self.level == rules.LEVEL_FAILED else f" ({self.level})"
        return f"[{self.rule}]{lv}{at} {self.message}{cite}"


@dataclass
class Verdict:
    """``outcome`` is upstream's (passed / failed / skipped: a non-strict case passed);
    ``level`` is the Autobahn-style verdict (rules.LEVELS, or skipped)."""

    outcome: str
    terminal: str | None
    findings: list[Finding]
    message: str
    level: str = ""

    def __post_init__(self) -> None:
        if not self.level:
            self.level = contract.OUTCOME_SKIPPED if self.outcome == contract.OUTCOME_SKIPPED \
                else rules.case_level(f.level for f in self.findings)

    @property
    def passed(self) -> bool:
        return self.outcome == contract.OUTCOME_PASSED


@dataclass
class Observation:
    """What the suite saw for one operation.

    ``events`` are the partial events in arrival order (``None`` where a frame did not decode);
    ``terminal_kind`` is the logical terminal (success/error/cancelled) or ``None`` when there
    was none. ``extra`` keys the checks read: ``late_events`` (events received after the
    terminal), ``decode_errors`` ({index: text}), ``terminal_decode_error``, ``flooded``,
    ``max_events``, ``delivery``, ``drop_reason``, ``status_code``, ``exception``.
    """

    events: list[dict[str, Any] | None] = field(default_factory=list)
    raw_events: list[Any] = field(default_factory=list)
    terminal_kind: str | None = None
    terminal_event: dict[str, Any] | None = None
    wire_findings: list[dict[str, Any]] = field(default_factory=list)
    timed_out: bool = False
    cancelled_at_index: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sequence(self) -> list[dict[str, Any] | None]:
        """Partial events then the terminal event (when it has one)."""
        seq = list(self.events)
        if self.terminal_event is not None:
            seq.append(self.terminal_event)
        return seq

    @property
    def terminal_index(self) -> int | None:
        return len(self.events) if self.terminal_event is not None else None


# --- helpers ------------------------------------------------------------------------------


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr, sort_keys=False)
    return text if len(text) <= _SHOW else f"{text[:_SHOW]}… ({len(text)} chars)"


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def _at(seq: list[Any], i: int) -> str:
    return f"event #{i}: {_show(seq[i])}"


def json_contains(actual: Any, expected: Any) -> bool:
    """Recursive subset: objects by key, arrays element-wise as a prefix, scalars equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and json_contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) >= len(expected) and all(
            json_contains(a, e) for a, e in zip(actual, expected, strict=False))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return expected == actual


def _mismatch(actual: Any, expected: Any, path: str = "") -> str | None:
    """The first place where ``actual`` does not contain ``expected``, as a readable line."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path or '/'}: expected an object, seen {_show(actual)}"
        for k, v in expected.items():
            if k not in actual:
                return f"{path}/{k}: missing (expected {_show(v)})"
            sub = _mismatch(actual[k], v, f"{path}/{k}")
            if sub:
                return sub
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            return f"{path or '/'}: expected an array starting with {_show(expected)}, " \
                   f"seen {_show(actual)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            sub = _mismatch(a, e, f"{path}/{i}")
            if sub:
                return sub
        return None
    if not json_contains(actual, expected):
        return f"{path or '/'}: expected {_show(expected)}, seen {_show(actual)}"
    return None


@dataclass
class _Ctx:
    case: PlannedCase
    obs: Observation
    manifest: Manifest | None
    capability_document: dict[str, Any] | None
    findings: list[Finding] = field(default_factory=list)
    strict: bool = False
    capability_file: str | None = None

    def fail(self, rule: str, message: str, *, index: int | None = None, expected: Any = None,
             seen: Any = None, spec: str = "") -> None:
        """A broken rule: ``failed`` for a profile rule, ``non-strict`` for a recommendation
        (``failed`` when strict); the rule's tag lives in the rulebook, not here."""
        level = rules.finding_level(rule, strict=self.strict)
        self.findings.append(Finding(rule, message, index, expected, seen, spec, level))

    def note(self, rule: str, message: str, *, seen: Any = None, spec: str = "") -> None:
        """Evidence worth reporting that judges nothing (``informational``)."""
        self.findings.append(Finding(rule, message, None, None, seen, spec,
                                     rules.LEVEL_INFORMATIONAL))

    @property
    def seq(self) -> list[Any]:
        return self.obs.sequence

    @property
    def body(self) -> dict[str, Any]:
        body = self.case.envelope.get("body") if isinstance(self.case.envelope, dict) else None
        return body if isinstance(body, dict) else {}


# --- always-on checks ---------------------------------------------------------------------


def check_wire(ctx: _Ctx) -> None:
    for wf in ctx.obs.wire_findings:
        rule = str(wf.get("rule") or "unknown")
        if rule == "client.max_events":
            continue  # the flood check reports it as flood.max-events
        ctx.fail(rule if rule.startswith("wire.") else f"wire.{rule}",
                 str(wf.get("detail") or wf.get("message") or rule),
                 index=wf.get("event_index"), spec=str(wf.get("spec") or f"{SPEC} §3 wire mapping"))


def check_exception(ctx: _Ctx) -> None:
    exc = ctx.obs.extra.get("exception")
    if exc:
        ctx.fail("wire.transport", f"the operation failed in the client: {exc}",
                 spec=f"{SPEC} §3 failure placement")


def check_decode(ctx: _Ctx) -> None:
    errors = ctx.obs.extra.get("decode_errors") or {}
    for i, ev in enumerate(ctx.obs.events):
        if ev is None:
            raw = ctx.obs.raw_events[i] if i < len(ctx.obs.raw_events) else None
            detail = errors.get(i) or getattr(raw, "decode_error", None) or "undecodable"
            body = getattr(raw, "raw", None)
            seen = bytes(body[:200]).decode("utf-8", "replace") if isinstance(
                body, bytes | bytearray) else None
            ctx.fail("event.decode", f"partial result #{i} is not one UTF-8 JSON event "
                     f"object: {detail}", index=i, expected="one raw UTF-8 JSON event object",
                     seen=seen, spec=f"{SPEC} §3 non-terminal results (D §7.1)")
    term_err = ctx.obs.extra.get("terminal_decode_error")
    if term_err:
        ctx.fail("event.decode", f"the terminal result body does not decode: {term_err}",
                 index=len(ctx.obs.events), spec=f"{SPEC} §3 terminal (D §8.1)")


def _extension_key(key: str, allowed: Iterable[str]) -> bool:
    return any(key == n or key.startswith(n + ".") or key == n.replace(".", "_")
               for n in allowed)


def _allowed_extensions(ctx: _Ctx) -> set[str]:
    if ctx.manifest is None:
        return set()
    return {n for n, crit in ctx.manifest.extensions.items()
            if not crit or n in (ctx.case.extensions or {})}


def check_schema(ctx: _Ctx) -> None:
    from nnrp_conformance import validation

    allowed = _allowed_extensions(ctx)
    seq = ctx.seq
    diagnostics_at: list[int] = []
    for i, ev in enumerate(seq):
        if ev is None:
            continue
        violations = []
        for v in validation.validate_event(ev):
            top = v.pointer[1:].replace("~1", "/").replace("~0", "~") \
                if v.rule == "additionalProperties" and v.pointer.count("/") == 1 else None
            if top is not None and _extension_key(top, allowed):
                continue
            if top == _DIAGNOSTICS_FIELD:
                diagnostics_at.append(i)  # a recommendation, judged below
                continue
            if v.pointer == "/error/code" and v.rule == "enum" \
                    and ev["error"]["code"] in contract.ERROR_CODE_ALIASES:
                continue  # an alias: error.code-alias (non-strict) names it
            violations.append(v)
        if violations:
            ctx.fail("event.schema",
                     f"{_type(ev) or 'event'} breaks its schema: "
                     + "; ".join(str(v) for v in violations) + f" — {_at(seq, i)}",
                     index=i, expected=contract.EVENT_SCHEMA_NAMES.get(_type(ev) or "", "event"),
                     seen=[str(v) for v in violations], spec=f"{SPEC} §4 events")
    if diagnostics_at:
        first = diagnostics_at[0]
        ctx.fail("event.diagnostics-field", f"{len(diagnostics_at)} event(s) carry a top-level "
                 f"{_DIAGNOSTICS_FIELD!r} field; the profile's place for diagnostics is the "
                 f"event's nnrp member — first: {_at(seq, first)}", index=first,
                 expected="nnrp.diagnostics", seen=_DIAGNOSTICS_FIELD,
                 spec=f"{SPEC} §4 events (unknown diagnostic fields must be ignored)")


def check_terminal(ctx: _Ctx) -> None:
    obs, seq = ctx.obs, ctx.seq
    for i, ev in enumerate(obs.events):
        if _type(ev) in contract.TERMINAL_EVENT_TYPES:
            ctx.fail("terminal.exactly-once",
                     f"terminal event {_type(ev)} arrived as a partial result; terminal events "
                     f"end the operation once, in its terminal — {_at(seq, i)}",
                     index=i, expected="only non-terminal events in PARTIAL_RESULT",
                     seen=_type(ev), spec=f"{SPEC} §3 terminal")
    term = obs.terminal_event
    if term is not None and _type(term) not in contract.TERMINAL_EVENT_TYPES:
        what = ("tool-call events are never terminal"
                if _type(term) in contract.TOOL_CALL_EVENT_TYPES
                else "a terminal carries response.completed, response.error or "
                     "response.cancelled")
        ctx.fail("terminal.kind", f"terminal result carries {_type(term)!r}: {what} — "
                 f"{_at(seq, len(obs.events))}", index=len(obs.events),
                 expected=list(contract.TERMINAL_EVENT_TYPES), seen=_type(term),
                 spec=f"{SPEC} §3 terminal, §4 tool-call events")
    if obs.terminal_kind is None:
        if obs.timed_out or obs.extra.get("flooded"):
            return  # reported by the timeout / flood checks
        delivery = obs.extra.get("delivery") or "none"
        ctx.fail("terminal.exactly-once",
                 f"the operation ended without a terminal (delivery: {delivery}; "
                 f"{obs.extra.get('terminal_detail') or 'no detail'})",
                 expected=ctx.case.expected_terminal, seen=None, spec=f"{SPEC} §3 terminal")
        return
    expected = ctx.case.expected_terminal
    if obs.terminal_kind != expected:
        ctx.fail("terminal.kind", f"terminal is {obs.terminal_kind!r}, the recipe expects "
                 f"{expected!r}" + (f" — {_at(seq, len(obs.events))}" if term else ""),
                 index=obs.terminal_index, expected=expected, seen=obs.terminal_kind,
                 spec=f"{SPEC} §3 terminal")
    if term is not None and _type(term) in contract.TERMINAL_EVENT_TYPES:
        want = contract.TERMINAL_EVENT_FOR.get(obs.terminal_kind)
        if _type(term) != want:
            ctx.fail("terminal.kind", f"a {obs.terminal_kind} terminal carries {_type(term)}, "
                     f"which belongs to another terminal kind — {_at(seq, len(obs.events))}",
                     index=len(obs.events), expected=want, seen=_type(term),
                     spec=f"{SPEC} §3 terminal (metadata must agree with the body)")


def check_after_terminal(ctx: _Ctx) -> None:
    late = ctx.obs.extra.get("late_events") or []
    cancelled = ctx.obs.cancelled_at_index is not None
    base = len(ctx.seq)
    for k, ev in enumerate(late):
        rule = "cancel.late-event" if cancelled else "terminal.after"
        ctx.fail(rule, f"{_type(ev) or 'a result'} arrived after the terminal"
                 + (" of a cancelled operation" if cancelled else "")
                 + f": {_show(ev)}", index=base + k, expected="nothing after the terminal",
                 seen=ev, spec=f"{SPEC} §3 terminal exactly once"
                 + ("; cancellation: results after the cancel are invalid" if cancelled else ""))
        if _type(ev) == contract.EV_OUTPUT_TEXT_DELTA:
            ctx.fail("order.text-before-terminal", "a text delta arrived after the terminal",
                     index=base + k, seen=ev, spec=f"{SPEC} §4 events, §3 terminal")


def _entry_count(entry: Mapping[str, Any]) -> int:
    if "min_count" in entry:
        return int(entry["min_count"])
    return 0 if entry.get("optional") else 1


def _with_recommended_code(ev: Any) -> Any:
    err = ev.get("error") if isinstance(ev, dict) else None
    if isinstance(err, dict) and err.get("code") in contract.ERROR_CODE_ALIASES:
        return {**ev, "error": {**err, "code": contract.ERROR_CODE_ALIASES[err["code"]]}}
    return ev


def check_expected(ctx: _Ctx) -> None:
    obs = ctx.obs
    if obs.terminal_kind is None and (obs.timed_out or obs.extra.get("flooded")):
        return  # an unfinished stream: the timeout / flood finding is the verdict's cause
    # an alias code matches its recommended code here; error.code-alias reports it
    seq = [_with_recommended_code(ev) for ev in ctx.seq]
    cursor = 0
    for k, entry in enumerate(ctx.case.expect.get("events") or ()):
        typ = entry["type"]
        fields = entry.get("fields")
        need = _entry_count(entry)
        candidates = [i for i in range(cursor, len(seq)) if _type(seq[i]) == typ]
        matching = [i for i in candidates if fields is None or json_contains(seq[i], fields)]
        label = f"expect.events[{k}] ({typ}" + (", optional" if entry.get("optional") else "") \
            + ")"
        spec = f"{SPEC} §8 recipe expectations"
        if len(matching) < need or (candidates and not matching):
            if candidates and fields is not None and not matching:
                first = candidates[0]
                ctx.fail("sequence.expected",
                         f"{label}: {typ} at or after event #{cursor} does not contain the "
                         f"expected fields: {_mismatch(seq[first], fields)} — {_at(seq, first)}",
                         index=first, expected=fields, seen=seq[first], spec=spec)
            else:
                earlier = [i for i in range(cursor) if _type(seq[i]) == typ]
                where = (f"; {len(earlier)} earlier one(s) out of order (first at #{earlier[0]})"
                         if earlier else "")
                ctx.fail("sequence.expected",
                         f"{label}: expected at least {need} {typ} at or after event #{cursor}, "
                         f"seen {len(matching)}{where}; observed types: "
                         f"{[_type(e) for e in seq]}",
                         index=cursor if cursor < len(seq) else None,
                         expected={"type": typ, "min_count": need, "fields": fields},
                         seen=len(matching), spec=spec)
        hi = entry.get("max_count")
        if hi is not None and len(candidates) > hi:
            extra = candidates[hi]
            ctx.fail("sequence.expected",
                     f"{label}: at most {hi} {typ} expected at or after event #{cursor}, "
                     f"seen {len(candidates)} — first extra: {_at(seq, extra)}",
                     index=extra, expected=hi, seen=len(candidates), spec=spec)
        if need > 0 and len(matching) >= need:
            cursor = matching[need - 1] + 1
        elif need == 0 and matching:
            cursor = matching[0] + 1


def check_tool_calls(ctx: _Ctx) -> None:
    from nnrp_conformance.tool_calls import RULE_ARGUMENTS, tool_call_problems

    seq = ctx.seq
    spec = f"{SPEC} §4 tool-call ordering"
    for p in tool_call_problems(seq, ctx.obs.terminal_kind):
        at = f" — {_at(seq, p.index)}" if p.index is not None else ""
        ctx.fail(p.rule, p.message + at, index=p.index, expected=p.expected, seen=p.seen,
                 spec=spec + (" (arguments = concatenation of the deltas)"
                              if p.rule == RULE_ARGUMENTS else ""))


def check_usage(ctx: _Ctx) -> None:
    seq = ctx.seq
    idx = [i for i, ev in enumerate(seq) if _type(ev) == contract.EV_USAGE]
    if len(idx) > 1:
        ctx.fail("usage.at-most-once", f"{len(idx)} response.usage events; the stream carries "
                 f"one usage summary — second: {_at(seq, idx[1])}", index=idx[1], expected=1,
                 seen=len(idx), spec=f"{SPEC} §4 events (D §7: the usage summary, final or "
                 "near-final)")


def _recommended_code(code: Any) -> Any:
    """The recommended code an alias stands for (the code itself when it is no alias)."""
    return contract.ERROR_CODE_ALIASES.get(code, code) if isinstance(code, str) else code


def _error_problems(err: Any) -> tuple[str | None, str | None]:
    """(body problem, code problem) of one error object; an alias is no problem here."""
    if not isinstance(err, dict):
        return f"error must be an object {{type, code, message}}, seen {_show(err)}", None
    bad = [k for k in ("type", "code", "message")
           if not isinstance(err.get(k), str) or not err.get(k)]
    if bad:
        return f"error.{', error.'.join(bad)} must be non-empty strings", None
    code, typ = _recommended_code(err["code"]), err["type"]
    if code not in contract.ERROR_CODES:
        return None, f"error.code {err['code']!r} is neither in the recommended list " \
                     f"({', '.join(contract.ERROR_CODES)}) nor a documented alias " \
                     f"({', '.join(contract.ERROR_CODE_ALIASES)})"
    if contract.ERROR_CODES[code] != typ:
        return None, f"error.type {typ!r} is not the family of code {err['code']!r} " \
                     f"(expected {contract.ERROR_CODES[code]!r})"
    return None, None


def check_errors(ctx: _Ctx) -> None:
    seq = ctx.seq
    for i, ev in enumerate(seq):
        if _type(ev) not in (contract.EV_ERROR, contract.EV_TOOL_CALL_ERROR):
            continue
        body_problem, code_problem = _error_problems(ev.get("error"))
        if body_problem:
            ctx.fail("error.body", f"{body_problem} — {_at(seq, i)}", index=i,
                     expected="{type, code, message}", seen=ev.get("error"),
                     spec=f"{SPEC} §5 errors")
        if code_problem:
            ctx.fail("error.code", f"{code_problem} — {_at(seq, i)}", index=i,
                     expected=dict(contract.ERROR_CODES), seen=ev.get("error"),
                     spec=f"{SPEC} §5 errors (the type family is fixed)")
        code = (ev.get("error") or {}).get("code") if isinstance(ev.get("error"), dict) else None
        if not body_problem and not code_problem and code in contract.ERROR_CODE_ALIASES:
            ctx.fail("error.code-alias", f"error.code {code!r} is another implementation's "
                     f"name; this suite recommends {contract.ERROR_CODE_ALIASES[code]!r}",
                     index=i, expected=contract.ERROR_CODE_ALIASES[code], seen=code,
                     spec=f"{SPEC} §5 errors (the code list beyond the profile's is a "
                     "recommendation)")
    expected_codes = {
        ((e.get("fields") or {}).get("error") or {}).get("code")
        for e in (ctx.case.expect or {}).get("events") or ()
        if e.get("type") == contract.EV_ERROR
    } - {None}
    seen_errors = [(i, ev) for i, ev in enumerate(seq) if _type(ev) == contract.EV_ERROR]
    if expected_codes and seen_errors:
        i, ev = seen_errors[-1]
        code = (ev.get("error") or {}).get("code") if isinstance(ev.get("error"), dict) else None
        # an alias of the expected code is the alias rule's (non-strict); never for a code the
        # profile fixes, which aliases cannot name
        if code not in expected_codes and _recommended_code(code) not in expected_codes:
            # The recipe names the code its case must map to: another (valid) code is a wrong
            # mapping, reported under its own rule and not only as a sequence mismatch.
            ctx.fail("error.code", f"error.code {code!r} where this case maps to "
                     f"{' or '.join(sorted(expected_codes))} — {_at(seq, i)}", index=i,
                     expected=sorted(expected_codes), seen=code,
                     spec=f"{SPEC} §5 errors (which failure maps to which code)")
    if ctx.obs.terminal_kind == contract.TERMINAL_ERROR and ctx.obs.terminal_event is None \
            and ctx.case.expected_terminal == contract.TERMINAL_ERROR:
        ctx.fail("error.body", "the error terminal carries no profile error body "
                 "(response.error)", expected=contract.EV_ERROR, seen=None,
                 spec=f"{SPEC} §3 failure placement, §5 errors")


def _chat_completion_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return [f"body must be an object, seen {_show(body)}"]
    problems = []
    if not isinstance(body.get("id"), str) or not body.get("id"):
        problems.append("body.id must be a non-empty string")
    if body.get("object") != "chat.completion":
        problems.append(f"body.object must be 'chat.completion', seen {_show(body.get('object'))}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        problems.append("body.choices must be a non-empty array")
    else:
        for n, choice in enumerate(choices):
            if not isinstance(choice, dict):
                problems.append(f"body.choices[{n}] must be an object")
                continue
            if not isinstance(choice.get("message"), dict):
                problems.append(f"body.choices[{n}].message must be an object")
            if "finish_reason" not in choice:
                problems.append(f"body.choices[{n}].finish_reason is missing")
    if not isinstance(body.get("usage"), dict):
        problems.append("body.usage must be an object")
    return problems


def check_nonstreaming(ctx: _Ctx) -> None:
    if ctx.case.operation != contract.OP_CHAT_COMPLETIONS_CREATE or ctx.body.get("stream") is True:
        return
    if ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    seq = ctx.seq
    spec = f"{SPEC} §4 non-streaming: one logical result"
    for i, ev in enumerate(ctx.obs.events):
        ctx.fail("nonstreaming.single-result", f"a non-streaming request produced a partial "
                 f"result — {_at(seq, i)}", index=i, expected="no partial results",
                 seen=_type(ev), spec=spec)
    term = ctx.obs.terminal_event
    if _type(term) != contract.EV_COMPLETED:
        ctx.fail("nonstreaming.body", "a successful non-streaming request must end with "
                 "response.completed carrying the chat completion", index=ctx.obs.terminal_index,
                 expected=contract.EV_COMPLETED, seen=_type(term), spec=spec)
        return
    problems = _chat_completion_problems(term.get("body"))
    if problems:
        ctx.fail("nonstreaming.body", "the completion body is not an OpenAI chat completion: "
                 + "; ".join(problems) + f" — {_at(seq, len(ctx.obs.events))}",
                 index=len(ctx.obs.events),
                 expected="{id, object: chat.completion, choices[].message, finish_reason, usage}",
                 seen=term.get("body"), spec=spec)


def check_cancel(ctx: _Ctx) -> None:
    case, obs = ctx.case, ctx.obs
    after = case.cancel_after_events
    if obs.cancelled_at_index is not None and obs.terminal_kind is None \
            and not obs.extra.get("flooded"):
        # Only the endpoint's own terminal answers a cancel: a drop or a push with
        # response.cancelled. nnrp-py's local lifecycle CANCELLED is ours, not proof.
        local = " (the client's local lifecycle CANCELLED is not the endpoint's answer)" \
            if obs.extra.get("local_cancelled") else ""
        ctx.fail("cancel.unanswered", "the server never answered the cancel: no "
                 "RESULT_DROP_REASON and no response.cancelled for the frame within the case "
                 f"limit ({obs.extra.get('timeout_s')}s){local}",
                 expected="the endpoint's terminal for the cancelled frame",
                 seen=obs.extra.get("delivery") or "nothing",
                 spec=f"{SPEC} §3 cancellation: the cancel ends the operation exactly once")
    if after is not None and obs.cancelled_at_index is None and after > 0:
        ctx.fail("cancel.not-sent", f"the operation ended after {len(obs.events)} event(s), "
                 f"before the cancel point ({after}): cancellation was not exercised",
                 expected=f">= {after} events before the terminal", seen=len(obs.events),
                 spec=f"{SPEC} §3 cancellation")
    nnrp = case.envelope.get("nnrp") if isinstance(case.envelope, dict) else None
    hint = nnrp.get("cancel_after_events") if isinstance(nnrp, dict) else None
    if isinstance(hint, int) and case.expected_terminal == contract.TERMINAL_CANCELLED \
            and obs.terminal_kind == contract.TERMINAL_CANCELLED:
        emitted = [e for e in obs.events if _type(e) not in contract.TERMINAL_EVENT_TYPES]
        if len(emitted) > hint:
            ctx.fail("cancel.hint", f"the endpoint emitted {len(emitted)} events although "
                     f"nnrp.cancel_after_events is {hint}", index=hint, expected=hint,
                     seen=len(emitted), spec=f"{SPEC} §3 cancellation (in-band hint)")


def check_cancel_reason(ctx: _Ctx) -> None:
    for i, ev in enumerate(ctx.seq):
        if _type(ev) != contract.EV_CANCELLED:
            continue
        reason = ev.get("reason")
        if isinstance(reason, str) and reason not in contract.CANCEL_SOURCES:
            ctx.fail("cancel.reason", f"response.cancelled.reason {reason!r} is outside the "
                     f"recommended reasons — {_at(ctx.seq, i)}", index=i,
                     expected=list(contract.CANCEL_SOURCES), seen=reason,
                     spec=f"{SPEC} §4 response.cancelled (the reason list is open)")


def check_claims(ctx: _Ctx) -> None:
    missing = tuple(getattr(ctx.case, "missing_capabilities", ()) or ())
    if missing:
        ctx.fail("capability.not-claimed",
                 f"the manifest claims Level {ctx.case.level} but not {', '.join(missing)}, "
                 f"which this mandatory Level {ctx.case.level} case requires",
                 expected=list(ctx.case.required_capabilities), seen=sorted(missing),
                 spec=f"{SPEC} §1 levels, §7 capability names")


def check_timeout(ctx: _Ctx) -> None:
    obs = ctx.obs
    if obs.extra.get("flooded"):
        ctx.fail("flood.max-events", f"more than {obs.extra.get('max_events')} events without a "
                 f"terminal; the suite cancelled the operation", expected=obs.extra.get(
                     "max_events"), seen=len(obs.events), spec=f"{SPEC} §3 terminal")
        return
    if obs.timed_out and obs.terminal_kind is None:
        if obs.cancelled_at_index is not None:
            return  # the cancel was sent: cancel.unanswered names the cause
        extra = obs.extra
        if extra.get("expired_by") == "idle":
            limit = f"nothing from the endpoint for the idle limit ({extra.get('idle_timeout_s')}s)"
        else:
            limit = f"the case limit ({extra.get('timeout_s')}s) passed"
        if not obs.events:
            ctx.fail("timeout.silence", f"no event and no terminal: {limit}",
                     expected="events then one terminal", seen="silence",
                     spec=f"{SPEC} §3 terminal (the operation ends exactly once)")
        else:
            last = extra.get("last_frame") or {}
            ctx.fail("timeout.no-terminal", f"{len(obs.events)} event(s), then no terminal: "
                     f"{limit} (last frame: {last.get('message_type')} at "
                     f"{last.get('after_submit_ms')} ms)", expected="one terminal",
                     seen=f"{len(obs.events)} events", spec=f"{SPEC} §3 terminal")


# --- named checks -------------------------------------------------------------------------


def _levels(doc: Mapping[str, Any]) -> list[int]:
    return sorted({lv for lv in doc.get("compatibility_levels") or () if isinstance(lv, int)})


def check_capability_document(ctx: _Ctx) -> None:
    term = ctx.obs.terminal_event
    doc = term.get("body") if _type(term) == contract.EV_COMPLETED else None
    spec = f"{SPEC} §6 capability document"
    if not isinstance(doc, dict):
        ctx.fail("capability.document", f"{contract.OP_CAPABILITIES_GET} must end with "
                 f"response.completed whose body is the capability document",
                 index=ctx.obs.terminal_index, expected="response.completed{body: document}",
                 seen=term, spec=spec)
        return
    _judge_document(ctx, doc, index=ctx.obs.terminal_index)
    fetched = ctx.capability_document
    if isinstance(fetched, dict) and fetched != doc:
        ctx.fail("capability.agreement", "the capability document differs between two "
                 "fetches in one run", expected=fetched, seen=doc, spec=spec)


def _judge_document(ctx: _Ctx, doc: dict[str, Any], *, index: int | None) -> None:
    """The capability document against its schema and the manifest, however it was had."""
    from nnrp_conformance import validation
    from nnrp_conformance.manifest import operation_flags

    spec = f"{SPEC} §6 capability document"
    for v in validation.validate("capability-document", doc):
        ctx.fail("capability.document", f"capability document: {v}",
                 index=index, expected=v.schema_path, seen=v.pointer, spec=spec)
    m = ctx.manifest
    if m is not None:
        agree = f"{spec}; the manifest and the document must agree"
        if _levels(doc) != sorted(m.claimed_levels):
            ctx.fail("capability.agreement", "compatibility_levels differ",
                     expected=sorted(m.claimed_levels), seen=_levels(doc), spec=agree)
        doc_ops = operation_flags(doc)
        for name in sorted(set(m.operations) | set(doc_ops)):
            if name not in doc_ops:
                ctx.fail("capability.agreement", f"operation {name!r} is in the manifest but "
                         f"not in the capability document", expected=name, seen=None,
                         spec=agree)
            elif name not in m.operations:
                ctx.fail("capability.agreement", f"operation {name!r} is in the capability "
                         f"document but not in the manifest", expected=None, seen=name,
                         spec=agree)
            elif doc_ops[name] != m.operations[name]:
                diff = {f: {"manifest": m.operations[name][f], "document": doc_ops[name][f]}
                        for f in m.operations[name] if m.operations[name][f] != doc_ops[name][f]}
                ctx.fail("capability.agreement", f"operation {name!r} flags differ: {diff}",
                         expected=m.operations[name], seen=doc_ops[name], spec=agree)
        doc_ext = {e.get("name"): e.get("critical") is True
                   for e in doc.get("extensions") or () if isinstance(e, dict)}
        if doc_ext != m.extensions:
            ctx.fail("capability.agreement", "extensions differ (name -> critical)",
                     expected=m.extensions, seen=doc_ext, spec=agree)
        doc_models = {x.get("id") for x in doc.get("models") or () if isinstance(x, dict)}
        missing = [mid for mid in m.models if mid not in doc_models]
        if missing:
            ctx.fail("capability.agreement", f"models in the manifest but not served: "
                     f"{missing}", expected=list(m.models), seen=sorted(map(str, doc_models)),
                     spec=agree)


def _discovery_missing(ctx: _Ctx) -> bool:
    """The endpoint answered the discovery operation as one it does not serve."""
    term = ctx.obs.terminal_event
    err = term.get("error") if _type(term) == contract.EV_ERROR else None
    return (ctx.case.operation == contract.OP_CAPABILITIES_GET
            and ctx.obs.terminal_kind == contract.TERMINAL_ERROR and isinstance(err, dict)
            and err.get("code") == contract.ERR_UNSUPPORTED_OPERATION)


def _judge_missing_discovery(ctx: _Ctx) -> None:
    """No discovery operation: non-strict (the profile says nowhere how to fetch the
    document, and prescribes unsupported_operation for an operation not advertised); the
    document is judged from the file the provider gave, if any."""
    for check in (check_wire, check_exception, check_decode, check_schema, check_after_terminal,
                  check_errors, check_timeout):
        check(ctx)
    op = contract.OP_CAPABILITIES_GET
    ctx.fail("capability.discovery", f"the endpoint does not serve the discovery operation "
             f"{op} (it answered unsupported_operation)", index=ctx.obs.terminal_index,
             expected=f"{op} answered with response.completed{{body: document}}",
             seen=contract.ERR_UNSUPPORTED_OPERATION,
             spec=f"{SPEC} §6 capability document (how to fetch it is open)")
    doc = ctx.capability_document
    if ctx.capability_file and isinstance(doc, dict):
        ctx.note("capability.discovery", f"capability document judged from the file "
                 f"{ctx.capability_file} (--nnrp-capabilities)", seen=ctx.capability_file)
        _judge_document(ctx, doc, index=None)
    else:
        ctx.note("capability.discovery", "the capability document was not judged: give it as "
                 "a file with --nnrp-capabilities FILE")


def check_usage_shape(ctx: _Ctx) -> None:
    seq = ctx.seq
    spec = f"{SPEC} §4 response.usage"
    for i, ev in enumerate(seq):
        if _type(ev) != contract.EV_USAGE:
            continue
        usage = ev.get("usage")
        bad = [k for k in ("input_tokens", "output_tokens", "total_tokens")
               if not isinstance(usage, dict) or isinstance(usage.get(k), bool)
               or not isinstance(usage.get(k), int) or usage.get(k) < 0]
        if bad:
            ctx.fail("usage.shape", f"usage.{', usage.'.join(bad)} must be non-negative "
                     f"integers — {_at(seq, i)}", index=i,
                     expected="{input_tokens, output_tokens, total_tokens}", seen=usage,
                     spec=spec)


def check_text_order(ctx: _Ctx) -> None:
    n = ctx.body.get("n")
    if isinstance(n, int) and n > 1:
        return
    seq = ctx.seq
    first: tuple[int, Any] | None = None
    for i, ev in enumerate(ctx.obs.events):
        if _type(ev) != contract.EV_OUTPUT_TEXT_DELTA:
            continue
        if first is None:
            first = (i, ev.get("index"))
        elif ev.get("index") != first[1]:
            ctx.fail("order.text-index", f"a single-output request's text deltas change index "
                     f"from {first[1]!r} (event #{first[0]}) — {_at(seq, i)}", index=i,
                     expected=first[1], seen=ev.get("index"),
                     spec=f"{SPEC} §4 output_text.delta index (position in the output)")
            return


NAMED_CHECKS: dict[str, Callable[[_Ctx], None]] = {
    "capability-document": check_capability_document,
    "usage-shape": check_usage_shape,
    "text-order": check_text_order,
}

_ALWAYS: tuple[Callable[[_Ctx], None], ...] = (
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
    check_nonstreaming,
    check_cancel,
    check_cancel_reason,
    check_claims,
    check_timeout,
    *RELATION_CHECKS,
)


def judge(case: PlannedCase, obs: Observation, *, manifest: Manifest | None = None,
          capability_document: dict[str, Any] | None = None, strict: bool = False,
          capability_file: str | None = None) -> Verdict:
    """Run every always-on check and the case's named checks. The verdict is the worst
    finding's level (rules.py); only a ``failed`` finding fails the case, and ``strict``
    makes every recommendation a failure. ``capability_file`` names the document file the
    provider gave, judged when the endpoint has no discovery operation."""
    ctx = _Ctx(case, obs, manifest, capability_document, strict=strict)
    ctx.capability_file = capability_file
    if _discovery_missing(ctx):
        _judge_missing_discovery(ctx)
        return _verdict(ctx)
    for check in _ALWAYS:
        check(ctx)
    for name in case.checks or ():
        fn = NAMED_CHECKS.get(name)
        if fn is None:
            ctx.fail("recipe.unknown-check", f"recipe asks for unknown check {name!r} "
                     f"(known: {', '.join(sorted(NAMED_CHECKS))})", spec="nnrp-conformance")
        else:
            fn(ctx)
    judge_beyond_profile(ctx)
    return _verdict(ctx)


#: the expectation rules a recipe's declared surplus may account for (nothing else)
_EXPECTATION_RULES = frozenset(("terminal.kind", "sequence.expected"))


def judge_beyond_profile(ctx: _Ctx) -> None:
    """A recipe that expects more than the profile (``beyond_profile``): a valid successful
    answer that fails only the recipe's expectations is judged under the recipe's
    recommendation rule (non-strict unless strict) instead of failed."""
    beyond = getattr(ctx.case, "beyond_profile", None)
    if not beyond or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    failed = [f for f in ctx.findings if f.level == rules.LEVEL_FAILED]
    if not failed or any(f.rule not in _EXPECTATION_RULES for f in failed):
        return
    ctx.findings = [f for f in ctx.findings if f.level != rules.LEVEL_FAILED]
    ctx.fail(beyond["rule"], f"a valid profile answer ({len(ctx.obs.events)} event(s), terminal "
             f"success), but not the {ctx.case.expected_terminal} this recipe expects beyond "
             f"the profile: {beyond['reading']}", index=ctx.obs.terminal_index,
             expected=ctx.case.expected_terminal, seen=ctx.obs.terminal_kind,
             spec=f"{SPEC}: the recipe's surplus over the profile is a recommendation")


def _verdict(ctx: _Ctx) -> Verdict:
    case, obs, findings = ctx.case, ctx.obs, ctx.findings
    level = rules.case_level(f.level for f in findings)
    outcome = contract.OUTCOME_FAILED if level == rules.LEVEL_FAILED else contract.OUTCOME_PASSED
    if findings:
        head = "; ".join(str(f) for f in findings[:3])
        more = f" (+{len(findings) - 3} more)" if len(findings) > 3 else ""
        message = f"{case.id}: {level}: {len(findings)} finding(s): {head}{more}"
    else:
        n = len(obs.events)
        message = f"{case.id}: {n} event(s), terminal {obs.terminal_kind}"
    return Verdict(outcome, obs.terminal_kind, findings, message, level)


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


#: the always-on checks that need no recipe: what any recorded answer must meet
_RECORDED: tuple[Callable[[_Ctx], None], ...] = (
    check_schema, check_terminal, check_after_terminal, check_tool_calls, check_usage,
    check_errors,
)


def judge_recorded(events: Any, terminal: str | None, *, what: str = "recorded answer",
                   manifest: Manifest | None = None, strict: bool = True) -> list[Finding]:
    """Judge a recorded event list (partials, the terminal event, anything after it) with
    the same checks as a case: the release smoke consumes these findings, so the smoke and
    the case verdicts can never disagree on one stream. Strict by default: the release gate
    holds the reference adapter to this project's recommendations too."""
    seq = [e for e in events] if isinstance(events, list) else []
    first = next((i for i, e in enumerate(seq) if _type(e) in contract.TERMINAL_EVENT_TYPES),
                 None)
    obs = Observation(events=seq if first is None else seq[:first],
                      terminal_kind=terminal if terminal in contract.TERMINALS else None,
                      terminal_event=None if first is None else seq[first])
    obs.raw_events = [None] * len(obs.events)
    if first is not None and first + 1 < len(seq):
        obs.extra["late_events"] = seq[first + 1:]
    case = _RecordedCase(what, terminal)
    ctx = _Ctx(case, obs, manifest, None, strict=strict)  # type: ignore[arg-type]
    for check in _RECORDED:
        check(ctx)
    return ctx.findings
