"""The idle limit each case gets: how long the run waits for a frame once the endpoint has shown
it leaves operations open in silence (docs/verdicts.md#bounds).

Owns :class:`Pace`, which the run's case sessions (``run_cases.py``) feed every judged result
and ask for each case's limit:

* until a case is ended by the idle limit, every case gets the full one;
* from then on the endpoint has shown it leaves an operation open in silence, and a case waits
  ``PACE_FACTOR`` times the slowest pace the endpoint itself showed on an operation it ended in
  this run (submit to first frame, between frames, to the terminal), at least
  ``SHORT_IDLE_FLOOR_S`` and never more than the full limit. A silent endpoint is then reported
  in one full idle limit plus a few seconds per case, and a slow one keeps its wait, because its
  own pace sets it.
* **a request answered in one result** (a generation request that is not streamed) is silent
  until its whole answer is made: its wait is the pace per token of the one-result answers the
  endpoint already gave in this run (their time to the terminal over the tokens their usage
  counts), times the tokens this request may ask for (chat's limit as ``usage.max-tokens``
  reads it, ``n`` choices of ``max_completion_tokens`` else ``max_tokens``; a Response's
  ``max_output_tokens``), times ``PACE_FACTOR``; the full limit
  while the endpoint has given no such answer, or when the request sets no token limit. (The
  streamed pace said nothing of it: the upstream adapter's 1.8 s non-streamed answer was cut at
  1.3 s, four times its 0.3 s streamed pace, and failed a mandatory recipe.)

The verdict still rests on what the endpoint sent: no frame at all within the endpoint's own
pace, measured in the same run under the same load.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.relations import token_limit

__all__ = ["PACE_FACTOR", "SHORT_IDLE_FLOOR_S", "Pace", "answered_in_one_result"]

#: once a case was ended by the idle limit, a later case waits this many times the slowest
#: pace the endpoint showed on an operation it ended ...
PACE_FACTOR = 4.0
#: ... and at least this long (seconds). The pace already scales with the machine's load (it is
#: measured in the same run); the floor only absorbs a pause of the client's own process. 1 s
#: is ten times the slowest pace the example endpoint shows on a loaded 2-core machine (90 ms)
#: and lets a run whose every tool case drops the session end in under two minutes
#: (docs/generation.md; 3 s took 195 s for 200 generated cases)
SHORT_IDLE_FLOOR_S = 1.0
_GENERATING = (contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_RESPONSES_CREATE)
_OUTPUT_TOKENS = ("completion_tokens", "output_tokens")


def _body(case: Any) -> dict[str, Any]:
    envelope = getattr(case, "envelope", None)
    body = envelope.get("body") if isinstance(envelope, dict) else None
    return body if isinstance(body, dict) else {}


def answered_in_one_result(case: Any) -> bool:
    """The case asks a generation operation for a whole answer in one result (no stream)."""
    return getattr(case, "operation", None) in _GENERATING and _body(case).get("stream") is not True


def _token_limit(case: Any) -> int | None:
    """The tokens the request may ask for: chat's limit as ``usage.max-tokens`` reads it
    (``checks/relations.py``: ``max_completion_tokens`` before ``max_tokens``, times ``n``),
    a Response's ``max_output_tokens``."""
    body = _body(case)
    if getattr(case, "operation", None) == contract.OP_CHAT_COMPLETIONS_CREATE:
        return token_limit(body)
    limit = body.get("max_output_tokens")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 \
        else None


def _output_tokens(result: Any) -> int | None:
    """The output tokens the usage of a one-result answer counts (None: it counts none)."""
    last = result.events[-1] if getattr(result, "events", None) else None
    body = last.get("body") if isinstance(last, dict) else None
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = [v for k in _OUTPUT_TOKENS if isinstance(v := usage.get(k), int)
              and not isinstance(v, bool) and v > 0]
    return counts[0] if counts else None


class Pace:
    """What the endpoint has shown of its pace in this run (module doc)."""

    def __init__(self, full_s: float) -> None:
        self.full_s = full_s
        #: the case the idle limit first ended (the limit is shortened from then on)
        self.ended_by: str | None = None
        #: the slowest wait for a frame on an operation the endpoint ended (seconds)
        self.slowest_s = 0.0
        #: the slowest time per output token of a one-result answer (seconds)
        self.per_token_s: float | None = None

    def observe(self, result: Any) -> None:
        """Learn from one operation's judged result."""
        diag = result.diagnostics
        if diag.get("expired_by") == "idle" and self.ended_by is None:
            self.ended_by = result.id
        gap = diag.get("slowest_gap_ms")
        if isinstance(gap, int | float):
            self.slowest_s = max(self.slowest_s, gap / 1000)
        span = result.span_ns
        tokens = _output_tokens(result)
        if result.terminal == contract.TERMINAL_SUCCESS and not diag.get("event_count") \
                and tokens is not None and span is not None and span[1] is not None:
            rate = (span[1] - span[0]) / 1e9 / tokens
            self.per_token_s = max(self.per_token_s or 0.0, rate)

    def limit(self, cases: Iterable[Any] = ()) -> float:
        """The idle limit of an operation (or operations in flight together) of ``cases``
        (module doc); none given: the streamed one."""
        if self.ended_by is None:
            return self.full_s
        short = min(self.full_s, max(SHORT_IDLE_FLOOR_S, PACE_FACTOR * self.slowest_s))
        waits = [short]
        for case in cases:
            if not answered_in_one_result(case):
                continue
            tokens = _token_limit(case)
            if tokens is None or self.per_token_s is None:
                return self.full_s
            waits.append(PACE_FACTOR * self.per_token_s * (tokens + 1))
        return min(self.full_s, max(waits))

    def shortened(self, case_id: str) -> dict[str, Any] | None:
        """What a result says when its limit was shortened (None: it was not)."""
        if self.ended_by is None or self.ended_by == case_id:
            return None
        out: dict[str, Any] = {"after": self.ended_by,
                               "slowest_pace_ms": round(self.slowest_s * 1000, 3)}
        if self.per_token_s is not None:
            out["one_result_ms_per_token"] = round(self.per_token_s * 1000, 3)
        return out
