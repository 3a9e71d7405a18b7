"""Checks on claims and the capability document: a mandatory case whose capabilities the
manifest does not claim (``capability.not-claimed``), the document against its schema and
the manifest (``capability.document``, ``capability.agreement``; this suite's closed objects
and lengths in it: ``capability.document-recommended``), and an endpoint without
the discovery operation (``capability.discovery``, judged from a file when one is given)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nnrp_conformance import contract, validation
from nnrp_conformance.checks.context import Context, type_of
from nnrp_conformance.checks.errors import check_errors
from nnrp_conformance.checks.stream import check_decode, check_exception, check_schema, check_wire
from nnrp_conformance.checks.terminal import check_after_terminal, check_timeout
from nnrp_conformance.manifest import stated_flags


def check_claims(ctx: Context) -> None:
    missing = tuple(getattr(ctx.case, "missing_capabilities", ()) or ())
    if missing:
        ctx.fail("capability.not-claimed",
                 f"the manifest claims Level {ctx.case.level} but not {', '.join(missing)}, "
                 f"which this mandatory Level {ctx.case.level} case requires",
                 expected=list(ctx.case.required_capabilities), seen=sorted(missing))


def _levels(doc: Mapping[str, Any]) -> list[int]:
    return sorted({lv for lv in doc.get("compatibility_levels") or () if isinstance(lv, int)})


def check_capability_document(ctx: Context) -> None:
    term = ctx.obs.terminal_event
    doc = term.get("body") if type_of(term) == contract.EV_COMPLETED else None
    if not isinstance(doc, dict):
        ctx.fail("capability.document", f"{contract.OP_CAPABILITIES_GET} must end with "
                 f"response.completed whose body is the capability document",
                 index=ctx.obs.terminal_index, expected="response.completed{body: document}",
                 seen=term)
        return
    _judge_document(ctx, doc, index=ctx.obs.terminal_index)
    fetched = ctx.capability_document
    if isinstance(fetched, dict) and fetched != doc:
        ctx.fail("capability.agreement", "the capability document differs between two "
                 "fetches in one run", expected=fetched, seen=doc)


#: the schema keywords of the capability document that are this suite's, not the profile's:
#: §13 shows the document by example, so its closed objects (an OpenAI model entry's
#: ``object`` and ``created``) and lengths are capability.document-recommended; so is the
#: shape of this suite's own ``models[].operations`` and ``security``
_DOCUMENT_RECOMMENDED = frozenset(("additionalProperties", "maxLength", "minLength"))


def _document_rule(v: validation.Violation) -> str:
    parts = v.pointer.split("/")
    ours = (len(parts) > 3 and parts[1] == "models" and parts[3] == "operations") \
        or (len(parts) > 1 and parts[1] == "security")  # our security claim (security.py)
    return "capability.document-recommended" if ours or v.rule in _DOCUMENT_RECOMMENDED \
        else "capability.document"


def _judge_document(ctx: Context, doc: dict[str, Any], *, index: int | None) -> None:
    """The capability document against its schema and the manifest, however it was had."""
    for v in validation.validate("capability-document", doc):
        ctx.fail(_document_rule(v), f"capability document: {v}",
                 index=index, expected=v.schema_path, seen=v.pointer)
    m = ctx.manifest
    if m is not None:
        if _levels(doc) != sorted(m.claimed_levels):
            ctx.fail("capability.agreement", "compatibility_levels differ",
                     expected=sorted(m.claimed_levels), seen=_levels(doc))
        # agreement is judged on what both sides state: a flag one of them leaves out is
        # unstated, not false (issue 27), and no message shows a value that was not sent
        doc_ops, man_ops = stated_flags(doc), stated_flags(m.data)
        for name in sorted(set(man_ops) | set(doc_ops)):
            if name not in doc_ops:
                ctx.fail("capability.agreement", f"operation {name!r} is in the manifest but "
                         f"not in the capability document", expected=name, seen=None)
            elif name not in man_ops:
                ctx.fail("capability.agreement", f"operation {name!r} is in the capability "
                         f"document but not in the manifest", expected=None, seen=name)
            else:
                both = sorted(set(man_ops[name]) & set(doc_ops[name]))
                diff = {f: {"manifest": man_ops[name][f], "document": doc_ops[name][f]}
                        for f in both if man_ops[name][f] != doc_ops[name][f]}
                if diff:
                    ctx.fail("capability.agreement", f"operation {name!r} flags differ: {diff}",
                             expected={f: v["manifest"] for f, v in diff.items()},
                             seen={f: v["document"] for f, v in diff.items()})
        if "extensions" in doc:  # a document that says nothing of extensions states none
            doc_ext = {e.get("name"): e.get("critical") is True
                       for e in doc.get("extensions") or () if isinstance(e, dict)}
            if doc_ext != m.extensions:
                ctx.fail("capability.agreement", "extensions differ (name -> critical)",
                         expected=m.extensions, seen=doc_ext)
        doc_models = {x.get("id") for x in doc.get("models") or () if isinstance(x, dict)}
        missing = [mid for mid in m.models if mid not in doc_models]
        if missing:
            ctx.fail("capability.agreement", f"models in the manifest but not served: "
                     f"{missing}", expected=list(m.models), seen=sorted(map(str, doc_models)))


def discovery_missing(ctx: Context) -> bool:
    """The endpoint answered the discovery operation as one it does not serve: with any
    error terminal (any code, or a drop without a profile body). The profile names no
    discovery operation and no code for an unsupported one (its §10 asks for an error)."""
    return (ctx.case.operation == contract.OP_CAPABILITIES_GET
            and ctx.obs.terminal_kind == contract.TERMINAL_ERROR)


def judge_missing_discovery(ctx: Context) -> None:
    """No discovery operation: non-strict (the profile says nowhere how to fetch the
    document); the document is judged from the file the provider gave, if any."""
    for check in (check_wire, check_exception, check_decode, check_schema, check_after_terminal,
                  check_errors, check_timeout):
        check(ctx)
    op = contract.OP_CAPABILITIES_GET
    term = ctx.obs.terminal_event
    err = term.get("error") if type_of(term) == contract.EV_ERROR else None
    code = err.get("code") if isinstance(err, dict) else None
    how = f"error code {code!r}" if code is not None else "an error terminal without a " \
        "profile error body"
    ctx.fail("capability.discovery", f"the endpoint does not serve the discovery operation "
             f"{op} (it answered with {how})", index=ctx.obs.terminal_index,
             expected=f"{op} answered with response.completed{{body: document}}", seen=code)
    doc = ctx.capability_document
    if ctx.capability_file and isinstance(doc, dict):
        ctx.note("capability.discovery", f"capability document judged from the file "
                 f"{ctx.capability_file} (--nnrp-capabilities)", seen=ctx.capability_file)
        _judge_document(ctx, doc, index=None)
    else:
        ctx.note("capability.discovery", "the capability document was not judged: give it as "
                 "a file with --nnrp-capabilities FILE")
