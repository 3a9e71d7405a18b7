"""Judgement: the verdict of one case, computed from what the suite itself observed.

Owns every conformance check applied to an observed operation (each a small function with a
stable rule id, one module per family) and :func:`judge`, which runs them and builds the
:class:`Verdict`. The families: ``stream`` (wire, decode, schema), ``terminal``, ``sequence``
(expectations, ordering, usage), ``errors``, ``bodies`` (non-streaming), ``cancel``,
``capability``, ``relations`` (fields that must agree), ``tool_call_body`` (tool calls
across calls and against the final body), ``responses`` (Level 2),
``discovery`` (Level 3), ``security`` (the security cases' sessions, judged apart from an
operation's checks: ``security.py`` runs them); ``context`` is what each check is
handed, ``model`` the verdict's data, ``judge`` which checks run and how they combine. Nothing
here trusts the endpoint's self-report: the input is the decoded traffic the suite received
(:class:`Observation`), the planned case and, for agreement checks, the manifest.

Always-on checks (rule ids): ``wire.*`` (the client's wire findings), ``event.decode``,
``event.schema``, ``terminal.exactly-once``, ``terminal.kind``, ``terminal.after``,
the recipe's expectations (each under its authority: authority.py), ``order.tool-call``, ``tool-call.arguments``, ``tool-call.index-unique``,
``tool-call.body-agreement``, ``usage.at-most-once``,
``error.body``, ``error.code``, ``nonstreaming.single-result``, ``nonstreaming.body``,
``cancel.not-sent``, ``cancel.unanswered``, ``cancel.late-event``, ``cancel.hint``, ``capability.not-claimed``,
``timeout.silence``, ``timeout.no-terminal``, ``flood.max-events``; for Level 2
(``responses``) ``output-item.lifecycle``, ``output-item.tool-call``, ``responses.body``,
``responses.final-body``, ``responses.usage-event``; for Level 3 (``discovery``)
``models.body``, ``models.agreement``, ``embeddings.body``, ``embeddings.order``.
Named checks a recipe opts into with ``checks: [...]``: ``capability-document``
(``capability.document``, ``capability.agreement``), ``usage-shape`` (``usage.shape``),
``text-order`` (``order.text-index``).

Matching ``expect.events`` (stricter than upstream's runner): one forward cursor over the
observed sequence (partial events, then the terminal event). For each entry, the events of
its type at or after the cursor that contain ``fields``, or one of its ``fields_any_of``
(recursive subset; arrays match element-wise as a prefix; scalars equal, ``true`` is not
``1``), are counted; at least
``min_count`` (default 1, or 0 when ``optional``) are needed and at most ``max_count`` of
that type may follow the cursor (an entry whose fields have another authority than its
presence counts every event of its type for the presence and reports the fields apart). The cursor then moves past the ``min_count``-th match, or
past the first match of an optional entry that is present, so optional entries are order-
and field-checked too.

Extension fields (the manifest's extensions; the vLLM adapter design §10.3): a top-level event field named after a manifest extension
(``name``, ``name.*``, or ``name`` with dots as underscores) is ignored by the schema check
when the extension is non-critical, or critical and selected for the case; so non-critical
extension fields never change a verdict. The field of a critical extension the case did not
select, like a profile field on an event type that does not carry it, collides: ``event.schema``
(docs/verdicts.md#field-collisions).
"""

from __future__ import annotations

from nnrp_conformance.checks.context import json_contains
from nnrp_conformance.checks.judge import NAMED_CHECKS, judge, judge_recorded
from nnrp_conformance.checks.model import Finding, Observation, Verdict

__all__ = [
    "NAMED_CHECKS",
    "Finding",
    "Observation",
    "Verdict",
    "json_contains",
    "judge",
    "judge_recorded",
]
