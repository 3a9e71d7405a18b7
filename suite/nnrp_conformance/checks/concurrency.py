"""Judgement across operations in flight together, on one session or two: what no single
operation's checks can see (docs/verdicts.md#concurrency).

Owns the concurrency rules and the overload reading. Each operation of a group was judged by
:func:`checks.judge` like any case; :func:`judge_group` reads the operations side by side:

* ``concurrency.cross-talk``: a partial event of one operation carries another's identity:
  a text delta its own final body does not contain but another operation's final body does,
  an OpenAI chunk (``openai_chunk``) whose ``id``/``model`` differ from its own final
  body's and equal another operation's, or a ``response.usage`` whose input count differs
  from its own final body's and whose counts are another operation's final usage;
* ``concurrency.terminal-swap``: an operation's terminal is another's: its final body's text
  is not what it streamed but exactly what another operation streamed, or two operations each
  ended with the terminal kind the other expected (both failed ``terminal.kind``);
* ``concurrency.neighbour-ended``: an operation ended cancelled or in error, failing its own
  ``terminal.kind``, while another operation of the group was cancelled by the client or
  failed.

Every rule needs the endpoint to contradict itself first (an operation's stream disagreeing
with its own final body, or a terminal its request does not call for), so an endpoint that is
right one operation at a time and keeps them apart never meets these rules, whatever its
model writes. The overload reading (:func:`mark_refusals`) is the profile's own row, §10
"Model overload or scheduling rejection: Profile error body plus NNRP diagnostic metadata": an
operation that ended in error before any output of its own, while another operation of the
group was in flight, with an answer that names a limit, an overload or scheduling (or NNRP's
own busy status: ``checks/refusals.py``, the one place that reads it), was refused admission,
whatever its request was (an invalid body refused before the endpoint looked at it is
refused, not wrongly rejected). That is allowed: its own expectation findings are set aside
(reported as the informational ``concurrency.refused``), it ends no neighbour by that, and no
neighbour is blamed for it. Any other error is judged as what it is: a context-length error
is an invalid request for that request, an error its request calls for is judged by that
error, and another operation's error reaching a neighbour is ``concurrency.neighbour-ended``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nnrp_conformance import authority, contract, rules
from nnrp_conformance.answer_reading import usage_of
from nnrp_conformance.checks.context import show, type_of
from nnrp_conformance.checks.refusals import names_own_size, refusal_named
from nnrp_conformance.findings import Finding

__all__ = ["REFUSAL_OWN_RULES", "Member", "judge_group", "mark_refusals"]

#: what a refused operation is still judged by: the refusal itself (its error body and
#: event, its frames, one terminal and nothing after it). Every other finding only says it
#: did not get what its request asked for (its terminal, events, body, usage, cancel point,
#: and the code: the profile names none for the overload row) and is set aside.
REFUSAL_OWN_RULES = ("error.body", "event.", "wire.", "terminal.exactly-once",
                     "terminal.after", "cancel.late-event")
_ENDINGS = (contract.TERMINAL_CANCELLED, contract.TERMINAL_ERROR)


@dataclass
class Member:
    """One operation of a group as judged: what it expected and what the endpoint sent."""

    name: str
    expected_terminal: str
    terminal: str | None
    #: partial events in arrival order (undecodable ones left out)
    events: list[Any]
    terminal_event: Any = None
    #: the client cancelled it (the recipe's request.cancel)
    cancelled_by_client: bool = False
    findings: list[Finding] = field(default_factory=list)
    #: (submitted, ended) in perf_counter ns; ended None: no terminal from the endpoint
    span_ns: tuple[int, int | None] | None = None
    #: the NNRP status its terminal came with (RESULT_PUSH status, RESULT_DROP reason)
    status_code: Any = None
    drop_reason: Any = None
    #: the endpoint refused its admission (set by :func:`mark_refusals`)
    refused: bool = False
    #: the rule its recipe's expected terminal kind is judged under (authority.py)
    terminal_rule: str = authority.DEFAULT_TERMINAL_RULE
    #: the session it was submitted on (``recipes.SESSION_SAME``, or ``SESSION_ANOTHER``:
    #: the group's second session)
    session: str = "same"


def _named(other: Member, member: Member) -> str:
    """``other`` as a finding about ``member`` names it: with its session when that is not
    ``member``'s (a crossing between sessions points at state the endpoint shares between
    them: a registry keyed on what each session numbers anew?)."""
    return repr(other.name) + (" (on the other session)" if other.session != member.session
                               else "")


def _overlapped(member: Member, other: Member) -> bool:
    """``other`` was in flight while ``member`` was: submitted before ``member`` ended, and
    not ended before ``member`` was submitted (unknown times: in flight, as the group was
    submitted together)."""
    if member.span_ns is None or other.span_ns is None:
        return True
    (start, end), (o_start, o_end) = member.span_ns, other.span_ns
    return (end is None or o_start < end) and (o_end is None or o_end > start)


def mark_refusals(members: list[Member]) -> None:
    """Set ``refused`` on each operation the endpoint refused admission (module doc): an
    error before any output, while another operation was in flight, that says it is a
    refusal (its words or NNRP's busy status), whatever the refused request asked for."""
    for m in members:
        m.refused = m.terminal == contract.TERMINAL_ERROR and not m.events \
            and refusal_named(m.terminal_event, status_code=m.status_code,
                              drop_reason=m.drop_reason) \
            and any(_overlapped(m, o) for o in members if o is not m)


def _finding(rule: str, message: str, *, strict: bool, index: int | None = None,
             expected: Any = None, seen: Any = None) -> Finding:
    return Finding(rule, message, index, expected, seen, rules.citation(rule),
                   rules.finding_level(rule, strict=strict))


def _wrong_kind(member: Member) -> bool:
    """The operation's own checks failed its terminal kind (``terminal.kind``, or the
    recipe's ``terminal_rule`` when it is strict): a terminal a reading of its recipe allows
    (a non-strict authority, ``beyond_profile``, a refusal) is never another's."""
    return any(f.rule in ("terminal.kind", member.terminal_rule)
               and f.level == rules.LEVEL_FAILED for f in member.findings)


def _final(ev: Any) -> dict[str, Any] | None:
    body = ev.get("body") if type_of(ev) == contract.EV_COMPLETED else None
    return body if isinstance(body, dict) else None


def _final_text(member: Member) -> str | None:
    """The final body's text: a chat completion's choices' contents, a Response's
    output_text parts (None: no final body with text)."""
    body = _final(member.terminal_event)
    if body is None:
        return None
    parts: list[str] = []
    for choice in body.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            parts.append(message["content"])
    for item in body.get("output") or () if isinstance(body.get("output"), list) else ():
        for part in (item.get("content") or ()) if isinstance(item, dict) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "".join(parts) if parts else None


def _deltas(member: Member) -> list[tuple[int, str]]:
    return [(i, ev["delta"]) for i, ev in enumerate(member.events)
            if type_of(ev) == contract.EV_OUTPUT_TEXT_DELTA and isinstance(ev.get("delta"), str)
            and ev["delta"].strip()]


def _streamed(member: Member) -> str:
    return "".join(d for _i, d in _deltas(member))


def _swapped_in(member: Member, others: list[Member]) -> Member | None:
    """The other operation whose streamed text this operation's final body carries, when that
    is not this operation's own streamed text."""
    final, own = _final_text(member), _streamed(member)
    if not final or not own or final == own:
        return None
    return next((o for o in others if _streamed(o) == final), None)


def _check_swaps(members: list[Member], strict: bool) -> set[str]:
    swapped: set[str] = set()
    for m in members:
        others = [o for o in members if o is not m]
        owner = _swapped_in(m, others)
        if owner is not None:
            swapped.add(m.name)
            m.findings.append(_finding(
                "concurrency.terminal-swap", f"the final body of {m.name!r} carries the text "
                f"{_named(owner, m)} streamed, not its own: the terminals were crossed",
                strict=strict, index=len(m.events), expected=_streamed(m)[:200],
                seen=(_final_text(m) or "")[:200]))
            continue
        for o in others:
            if m.refused or o.refused:
                continue  # a refusal is allowed, whichever operation it meets
            if m.name < o.name and _wrong_kind(m) and _wrong_kind(o) \
                    and m.expected_terminal != o.expected_terminal \
                    and m.terminal == o.expected_terminal \
                    and o.terminal == m.expected_terminal:
                swapped.update((m.name, o.name))
                for a, b in ((m, o), (o, m)):
                    a.findings.append(_finding(
                        "concurrency.terminal-swap", f"{a.name!r} ended {a.terminal} and "
                        f"{_named(b, a)} {b.terminal}: each got the terminal the other expects",
                        strict=strict, expected=a.expected_terminal, seen=a.terminal))
    return swapped


def _ids(ev: Any) -> tuple[Any, Any]:
    chunk = ev.get("openai_chunk") if isinstance(ev, dict) else None
    return (chunk.get("id"), chunk.get("model")) if isinstance(chunk, dict) else (None, None)


def _usage_owner(ev: Any, own: dict[str, Any], others: list[Member],
                 bodies: dict[str, dict[str, Any]]) -> Member | None:
    """The other operation whose final usage a ``response.usage`` event carries, when its
    input count is not its own final body's: a usage event may come near the end, before the
    last output tokens (§7: "Final or near-final"), but the input was counted at the submit."""
    if type_of(ev) != contract.EV_USAGE:
        return None
    said, mine = usage_of(ev.get("usage")), usage_of(own.get("usage"))
    if said is None or mine is None or said.get("input") in (None, mine.get("input")):
        return None
    return next((o for o in others if usage_of(bodies[o.name].get("usage")) == said), None)


def _check_cross_talk(members: list[Member], swapped: set[str], strict: bool) -> None:
    finals = {m.name: _final_text(m) for m in members}
    bodies = {m.name: _final(m.terminal_event) or {} for m in members}
    for m in members:
        own_text, own = finals[m.name], bodies[m.name]
        if m.name in swapped:
            continue  # its final body is another's: its own stream is judged by the swap
        others = [o for o in members if o is not m]
        for i, ev in enumerate(m.events):
            owner = None
            delta = ev.get("delta") if type_of(ev) == contract.EV_OUTPUT_TEXT_DELTA else None
            if isinstance(delta, str) and delta.strip() and own_text is not None \
                    and delta not in own_text:
                owner = next((o for o in others
                              if finals[o.name] and delta in (finals[o.name] or "")), None)
            chunk_id, chunk_model = _ids(ev)
            for key, value in (("id", chunk_id), ("model", chunk_model)):
                if owner is None and value is not None and own.get(key) not in (None, value):
                    owner = next((o for o in others if bodies[o.name].get(key) == value), None)
            if owner is None:
                owner = _usage_owner(ev, own, others, bodies)
            if owner is not None:
                m.findings.append(_finding(
                    "concurrency.cross-talk", f"event #{i} of {m.name!r} belongs to "
                    f"{_named(owner, m)} (its final body has it, {m.name!r}'s does not): "
                    f"{show(ev)}", strict=strict, index=i, seen=ev))
                break  # one finding per operation: the first event that crossed


def _check_neighbours(members: list[Member], strict: bool) -> None:
    enders = [m for m in members if m.cancelled_by_client
              or (m.terminal == contract.TERMINAL_ERROR and not m.refused)]
    for m in members:
        if m.terminal not in _ENDINGS or not _wrong_kind(m) or m.cancelled_by_client \
                or m.refused or names_own_size(m.terminal_event):
            continue  # an error naming its own request's size is its own, no neighbour's
        cause = next((e for e in enders if e is not m), None)
        if cause is not None:
            why = "was cancelled" if cause.cancelled_by_client else "failed"
            m.findings.append(_finding(
                "concurrency.neighbour-ended", f"{m.name!r} expected {m.expected_terminal} but "
                f"ended {m.terminal} while {_named(cause, m)} {why}: one operation's end must not "
                f"end another", strict=strict, expected=m.expected_terminal, seen=m.terminal))


def _set_aside(member: Member) -> None:
    """The overload reading: a refused operation's expectation findings become one note."""
    kept = [f for f in member.findings if f.rule.startswith(REFUSAL_OWN_RULES)]
    if len(kept) == len(member.findings) and member.terminal == member.expected_terminal:
        return
    event = member.terminal_event
    err = event.get("error") if isinstance(event, dict) else None
    said = err if err is not None else {"status_code": member.status_code,
                                        "drop_reason": member.drop_reason}
    member.findings = [*kept, replace(
        _finding("concurrency.refused", f"{member.name!r} was refused with "
                 f"{show(said)}: the profile's overload or scheduling rejection, allowed for "
                 f"operations in flight together", strict=False, seen=said),
        level=rules.LEVEL_INFORMATIONAL)]


def judge_group(members: list[Member], *, strict: bool = False) -> None:
    """Add the concurrency findings to each member's own (module doc), in place."""
    mark_refusals(members)
    for m in members:
        if m.refused:
            _set_aside(m)
    if len(members) < 2:
        return
    swapped = _check_swaps(members, strict)
    _check_cross_talk(members, swapped, strict)
    _check_neighbours(members, strict)
