"""The comparison of the two answers to one request body: each difference a finding.

Owns :func:`compare_answers`: which fields are compared when, and the one finding per
differing field, its rule ``twin.<field>`` (the rulebook's recommendations: the profile does
not require an NNRP endpoint to answer as its HTTP API does) with the HTTP API's value as the
recommended one and the NNRP value as the one seen, side by side in its message too.

* ``twin.outcome``: success on one side, an error on the other, or two errors of different
  families (the HTTP family: :func:`.answers.family_of_status`); when the outcomes differ
  nothing else is compared;
* ``twin.choices``: how many choices a chat completion holds, whenever both sides answered
  one (the request's ``n`` decides it, not the sampling);
* ``twin.text``, ``twin.finish-reason``, ``twin.tool-calls``: of every choice index both sides
  hold, only when the request decides them (``temperature: 0``, or a ``seed``); else the
  sampling does, and the comparison says so. Choice 0's are listed as ``text``,
  ``finish-reason``, ``tool-calls``, another's with its index (``text[1]``), and the finding's
  message names that choice; a choice only one side holds is not compared (``twin.choices``
  tells the difference);
* ``twin.usage``: the counts both sides report (input always; output and total when the
  request decides the output);
* ``twin.embeddings``: how many vectors, their dimensions, and their values within a float
  tolerance; ``twin.models``: the model ids listed.

A field one side does not carry is listed as not compared, never as a difference (an HTTP
stream carries usage only when ``stream_options.include_usage`` asks for it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance import rules
from nnrp_conformance.findings import Finding
from nnrp_conformance.twin.answers import ERROR, Answer

__all__ = ["RULE_PREFIX", "Comparison", "compare_answers", "decided_by_request"]

RULE_PREFIX = "twin."
#: the fields generation decides (an answer of models.list or embeddings.create has none)
_GENERATED = frozenset({"text", "finish_reason", "tool_calls"})
#: each choice's compared fields: (rule and listed name, Answer field, what it is)
_CHOICE = (("text", "text", "the text"), ("finish-reason", "finish_reason", "the finish reason"),
           ("tool-calls", "tool_calls", "the tool calls (name, arguments)"))
#: embedding values this close count as equal (two serving paths may batch differently)
ABS_TOLERANCE = 1e-4
REL_TOLERANCE = 1e-3
_SHOWN = 160  # characters of a value quoted in a finding's message


@dataclass
class Comparison:
    """What was compared and what differed, for the case's diagnostics and its verdict."""

    findings: list[Finding] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)
    not_compared: dict[str, str] = field(default_factory=dict)


def decided_by_request(body: Mapping[str, Any]) -> bool:
    """Whether the request fixes its output: greedy (``temperature: 0``) or seeded."""
    temperature = body.get("temperature")
    greedy = isinstance(temperature, int | float) and not isinstance(temperature, bool) \
        and temperature == 0
    seed = body.get("seed")
    return greedy or (isinstance(seed, int) and not isinstance(seed, bool))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def _text_note(nnrp: Any, http: Any) -> str:
    if isinstance(nnrp, str) and isinstance(http, str):
        at = _first_difference(nnrp, http)
        return f" (first difference at character {at}; {len(nnrp)} vs {len(http)} characters)"
    return ""


def _vectors_differ(nnrp: Any, http: Any) -> str | None:
    """Why two embedding lists differ, or None."""
    if not isinstance(nnrp, list) or not isinstance(http, list):
        return None if nnrp == http else "not both lists of vectors"
    if len(nnrp) != len(http):
        return f"{len(nnrp)} vs {len(http)} vectors"
    for i, (a, b) in enumerate(zip(nnrp, http, strict=True)):
        if not (isinstance(a, list) and isinstance(b, list)):
            if a != b:
                return f"vector {i} is not a list of numbers on both sides"
            continue
        if len(a) != len(b):
            return f"vector {i}: {len(a)} vs {len(b)} dimensions"
        for j, (x, y) in enumerate(zip(a, b, strict=True)):
            if not (isinstance(x, int | float) and isinstance(y, int | float)) or \
                    not math.isclose(x, y, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE):
                return f"vector {i}[{j}]: {_short(x)} vs {_short(y)}"
    return None


def _usage_view(usage: Any, keys: tuple[str, ...]) -> Any:
    return {k: v for k, v in usage.items() if k in keys} if isinstance(usage, dict) else usage


class _Comparer:
    def __init__(self, where: str, strict: bool) -> None:
        self.where, self.strict = where, strict
        self.out = Comparison()

    def differ(self, name: str, what: str, nnrp: Any, http: Any, note: str = "") -> None:
        rule = f"{RULE_PREFIX}{name}"
        message = (f"{what} differs from the HTTP API's answer to the same body "
                   f"({self.where}): NNRP {_short(nnrp)} | HTTP {_short(http)}{note}")
        self.out.findings.append(Finding(rule, message, None, http, nnrp, rules.citation(rule),
                                         rules.finding_level(rule, strict=self.strict)))

    def field(self, name: str, what: str, nnrp: Any, http: Any,
              same: Callable[[Any, Any], str | None] | None = None, *,
              listed: str | None = None) -> None:
        """Compare one field (rule ``twin.<name>``), listed as ``listed`` or ``name``."""
        listed = listed or name
        if nnrp is None and http is None:
            return  # not a field of this operation's answers
        if nnrp is None or http is None:
            side = "the NNRP answer" if nnrp is None else "the HTTP answer"
            self.out.not_compared[listed] = f"not in {side}"
            return
        self.out.compared.append(listed)
        if same is not None:
            why = same(nnrp, http)
            if why is not None:
                self.differ(name, what, f"{len(nnrp) if isinstance(nnrp, list) else '?'} "
                            "vector(s)", f"{len(http) if isinstance(http, list) else '?'} "
                            "vector(s)", f" ({why})")
        elif nnrp != http:
            self.differ(name, what, nnrp, http, _text_note(nnrp, http) if name == "text" else "")

    def choices(self, nnrp: Answer, http: Answer) -> None:
        """Each choice index both sides hold: choice 0 as ever, the others named."""
        for name, key, what in _CHOICE:
            self.field(name, what, nnrp.fields.get(key), http.fields.get(key))
        for i in sorted((nnrp.choices.keys() & http.choices.keys()) - {0}):
            for name, key, what in _CHOICE:
                self.field(name, f"{what} of choice {i}", nnrp.choices[i].get(key),
                           http.choices[i].get(key), listed=f"{name}[{i}]")
        for i in sorted(nnrp.choices.keys() ^ http.choices.keys()):
            side = "NNRP" if i in nnrp.choices else "HTTP"
            self.out.not_compared[f"choice {i}"] = f"only in the {side} answer"


def _count(answer: Answer) -> int | None:
    """How many choices a chat completion holds (None: not a chat completion, or none read)."""
    return len(answer.choices) or None


def compare_answers(nnrp: Answer, http: Answer, body: Mapping[str, Any], *, where: str,
                    strict: bool = False) -> Comparison:
    """Compare the NNRP answer with the HTTP API's to the same ``body`` (module doc)."""
    c = _Comparer(where, strict)
    outcome = ("outcome", "success or error")
    if nnrp.outcome != http.outcome:
        c.out.compared.append(outcome[0])
        seen = nnrp.error_raw if nnrp.outcome == ERROR else nnrp.outcome
        sent = http.error_raw if http.outcome == ERROR else http.outcome
        c.differ(*outcome, seen, sent)
        return c.out
    if nnrp.outcome == ERROR:
        c.out.compared.append(outcome[0])
        if nnrp.error_type != http.error_type:
            c.differ("outcome", "the error family", nnrp.error_raw, http.error_raw,
                     f" (families {nnrp.error_type} vs {http.error_type})")
        return c.out
    c.out.compared.append(outcome[0])
    a, b = nnrp.fields, http.fields
    keys: tuple[str, ...] = ("input", "output", "total")
    c.field("choices", "the number of choices", _count(nnrp), _count(http))
    if not (a.keys() & _GENERATED or b.keys() & _GENERATED):
        pass  # an answer nothing generates (models, embeddings)
    elif decided_by_request(body):
        c.choices(nnrp, http)
    else:
        for name in ("text", "finish-reason", "tool-calls"):
            c.out.not_compared[name] = "sampled: the request sets neither temperature 0 nor a seed"
        keys = ("input",)
    c.field("usage", "the usage", _usage_view(a.get("usage"), keys),
            _usage_view(b.get("usage"), keys))
    c.field("embeddings", "the embeddings", a.get("embeddings"), b.get("embeddings"),
            same=_vectors_differ)
    c.field("models", "the model list", a.get("models"), b.get("models"))
    return c.out
