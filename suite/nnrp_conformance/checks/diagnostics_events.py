"""A diagnostics event answering the request's own diagnostics hint: set aside, shown, never a
stream error (docs/verdicts.md#readings).

The profile's texts disagree on where diagnostics go. §6 lets a client ask for them ("``nnrp``
| Optional | NNRP-specific policy and diagnostics hints", its example sending
``"diagnostics": true``) and §11 says "Diagnostics are extension-friendly. Unknown diagnostic
fields must be ignored by clients unless the client explicitly opts into a stricter
adapter-specific schema", but no table of §7 lists an event that carries them, and §7.1 makes
"an event shape outside this profile" a profile stream error. The upstream vLLM adapter
answers ``nnrp.diagnostics: true`` with a partial ``{"type": "response.diagnostics",
"diagnostics": {...}}`` and declares it under its non-critical extension ``vllm.diagnostics``
("Adapter may include NNRP diagnostics without changing Level 1 baseline pass/fail"). Where
the documents disagree every reasonable reading passes, so such an event, on a request that
asked for diagnostics, is set aside before any check reads the stream: the checks judge the
operation as if it had not been sent (a non-streamed answer is still one result), and the
recommendation ``event.diagnostics-event`` shows it (this suite recommends diagnostics under
the events' ``nnrp`` member, where no client meets an event type it does not know).

Owns :func:`set_aside_diagnostics`, run by the judge before every check. An event of this
shape on a request that did not ask for diagnostics is left in the stream, where the event
schema judges it as any other.
"""

from __future__ import annotations

from typing import Any

from nnrp_conformance.checks.context import Context, type_of

__all__ = ["KEY", "set_aside_diagnostics"]

#: ``Observation.extra``'s member holding the events set aside, by their arrival index
KEY = "diagnostics_events"
_MEMBERS = frozenset({"type", "diagnostics", "nnrp"})


def _asked(ctx: Context) -> bool:
    envelope = ctx.case.envelope if isinstance(ctx.case.envelope, dict) else {}
    hints = envelope.get("nnrp")
    return isinstance(hints, dict) and hints.get("diagnostics") is True


def _is_diagnostics_event(event: Any) -> bool:
    """An event of a type the profile does not list that names diagnostics and carries them
    in a ``diagnostics`` object, nothing else."""
    kind = type_of(event)
    return isinstance(event, dict) and isinstance(kind, str) and "diagnostic" in kind \
        and isinstance(event.get("diagnostics"), dict) and set(event) <= _MEMBERS


def set_aside_diagnostics(ctx: Context) -> None:
    """Remove the diagnostics events the request asked for from the observed stream (module
    doc), keeping every index the other checks read consistent."""
    obs = ctx.obs
    if not _asked(ctx) or not any(_is_diagnostics_event(e) for e in obs.events):
        return
    kept: list[int] = []
    aside: dict[int, Any] = {}
    for i, event in enumerate(obs.events):
        if _is_diagnostics_event(event):
            aside[i] = event
        else:
            kept.append(i)
    new_index = {old: new for new, old in enumerate(kept)}
    raw = obs.raw_events if len(obs.raw_events) == len(obs.events) else [None] * len(obs.events)
    obs.events = [obs.events[i] for i in kept]
    obs.raw_events = [raw[i] for i in kept]
    errors = obs.extra.get("decode_errors")
    if isinstance(errors, dict):
        obs.extra["decode_errors"] = {new_index[i]: text for i, text in errors.items()
                                      if i in new_index}
    if obs.cancelled_at_index is not None:
        # the cancel went out after the events before it: as many kept ones as came before
        obs.cancelled_at_index = sum(1 for i in kept if i < obs.cancelled_at_index)
    obs.extra[KEY] = aside
    first = min(aside)
    ctx.fail("event.diagnostics-event", f"{len(aside)} event(s) of a type the profile does not "
             f"list carry the diagnostics the request asked for (nnrp.diagnostics: true), set "
             f"aside before judging the stream; this suite recommends diagnostics under the "
             f"events' nnrp member — first, arrival #{first}: {aside[first]}",
             expected="nnrp.diagnostics on a profile event", seen=type_of(aside[first]))
