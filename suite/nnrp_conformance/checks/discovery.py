"""Level 3 checks: ``models.list`` and ``embeddings.create`` answers (docs/levels.md).

Rule ids: ``models.body`` (an OpenAI model list), ``models.agreement`` (its ids are exactly the
capability document's models), ``embeddings.body`` (one embedding per input, ``index`` in
input order, equal non-empty lengths, ``dimensions`` honoured, usage), ``embeddings.order`` (a
repeated input gets the same vector at both positions, and it is nearer to its twin than to any
other input's: a batch answered out of order shows here without knowing the model).
"""

from __future__ import annotations

import math
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, show, type_of

__all__ = ["DISCOVERY_CHECKS"]

#: cosine similarity two embeddings of one text must reach (batching may change rounding)
SAME_TEXT_COSINE = 0.999


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _completed_body(ctx: Context, operation: str) -> Any:
    if ctx.case.operation != operation or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return None
    term = ctx.obs.terminal_event
    return term.get("body", {}) if type_of(term) == contract.EV_COMPLETED else {}


def _model_list_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return [f"body must be an object, seen {show(body)}"]
    problems = []
    if body.get("object") != "list":
        problems.append(f"body.object must be 'list', seen {show(body.get('object'))}")
    data = body.get("data")
    if not isinstance(data, list):
        return [*problems, "body.data must be an array of models"]
    for n, model in enumerate(data):
        if not (isinstance(model, dict) and isinstance(model.get("id"), str) and model["id"]):
            problems.append(f"body.data[{n}] must be a model with a non-empty string id")
        elif model.get("object") != "model":
            problems.append(f"body.data[{n}].object must be 'model'")
        elif not isinstance(model.get("owned_by"), str):
            problems.append(f"body.data[{n}].owned_by must be a string")
    return problems


def check_models_list(ctx: Context) -> None:
    body = _completed_body(ctx, contract.OP_MODELS_LIST)
    if body is None:
        return
    where = ctx.obs.terminal_index
    problems = _model_list_problems(body)
    if problems:
        ctx.fail("models.body", "the models.list answer is not an OpenAI model list: "
                 + "; ".join(problems), index=where,
                 expected="{object: list, data: [{id, object: model, owned_by}]}", seen=body)
        return
    doc = ctx.capability_document
    if not isinstance(doc, dict):
        return  # no document to agree with (capability.* judges its absence)
    listed = sorted({m["id"] for m in body["data"]})
    documented = sorted({m["id"] for m in doc.get("models") or ()
                         if isinstance(m, dict) and isinstance(m.get("id"), str)})
    if listed != documented:
        missing = sorted(set(documented) - set(listed))
        extra = sorted(set(listed) - set(documented))
        ctx.fail("models.agreement", f"models.list and the capability document name different "
                 f"models: missing from the list {missing}, not in the document {extra}",
                 index=where, expected=documented, seen=listed)


def _inputs(body: dict[str, Any]) -> list[Any] | None:
    """The request's inputs, one per embedding it asks for: OpenAI's ``input`` is a text, an
    array of texts, an array of token ids (one input) or an array of such arrays."""
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(
            isinstance(t, int) and not isinstance(t, bool) for t in value):
        return [value]
    return value if isinstance(value, list) and value else None


def _vectors(body: Any, want: int | None, dims: Any) -> tuple[list[str], list[list[float]]]:
    """The problems of an embeddings body, and its vectors in index order when it has none."""
    if not isinstance(body, dict):
        return [f"body must be an object, seen {show(body)}"], []
    problems = []
    if body.get("object") != "list":
        problems.append(f"body.object must be 'list', seen {show(body.get('object'))}")
    data = body.get("data")
    if not isinstance(data, list):
        return [*problems, "body.data must be an array of embeddings"], []
    if want is not None and len(data) != want:
        problems.append(f"body.data has {len(data)} embeddings for {want} inputs")
    vectors: list[list[float]] = []
    for n, entry in enumerate(data):
        emb = entry.get("embedding") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or entry.get("object") != "embedding":
            problems.append(f"body.data[{n}] must be an object with object 'embedding'")
        elif entry.get("index") != n:
            problems.append(f"body.data[{n}].index is {show(entry.get('index'))}, not {n} "
                            f"(one embedding per input, in input order)")
        elif not (isinstance(emb, list) and emb and all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                for x in emb)):
            problems.append(f"body.data[{n}].embedding must be a non-empty array of finite "
                            f"numbers")
        else:
            vectors.append([float(x) for x in emb])
    lengths = sorted({len(v) for v in vectors})
    if len(lengths) > 1:
        problems.append(f"the embeddings have different lengths {lengths} (one model, one "
                        f"dimension)")
    if _int(dims) and lengths and lengths != [dims]:
        problems.append(f"the request asks for {dims} dimensions; the embeddings have {lengths}")
    usage = body.get("usage")
    if not (isinstance(usage, dict) and _int(usage.get("prompt_tokens"))
            and _int(usage.get("total_tokens"))):
        problems.append("body.usage must carry prompt_tokens and total_tokens (integers)")
    if not (isinstance(body.get("model"), str) and body["model"]):
        problems.append("body.model must be a non-empty string")
    return problems, vectors if not problems else []


def _cosine(a: list[float], b: list[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


def check_embeddings(ctx: Context) -> None:
    body = _completed_body(ctx, contract.OP_EMBEDDINGS_CREATE)
    if body is None:
        return
    if ctx.body.get("encoding_format", "float") != "float":
        return  # base64 vectors: the recipes ask for floats; nothing judged here
    inputs = _inputs(ctx.body)
    where = ctx.obs.terminal_index
    problems, vectors = _vectors(body, len(inputs) if inputs else None, ctx.body.get("dimensions"))
    if problems:
        ctx.fail("embeddings.body", "the embeddings answer breaks OpenAI's embedding list: "
                 + "; ".join(problems), index=where,
                 expected="{object: list, data: [{object: embedding, index: i, embedding}], "
                 "model, usage}", seen=show(body))
        return
    if not inputs or len(vectors) != len(inputs):
        return
    for i, text in enumerate(inputs):
        twins = [j for j in range(i + 1, len(inputs)) if inputs[j] == text]
        for j in twins:
            same = _cosine(vectors[i], vectors[j])
            nearest = max((_cosine(vectors[i], vectors[k]), k) for k in range(len(inputs))
                          if inputs[k] != text) if len(set(map(str, inputs))) > 1 else None
            if same < SAME_TEXT_COSINE or (nearest is not None and nearest[0] >= same):
                why = (f"cosine {same:.4f} < {SAME_TEXT_COSINE}" if same < SAME_TEXT_COSINE
                       else f"input {nearest[1] if nearest else '?'} (another text) is as near "
                       f"({nearest[0] if nearest else 0:.4f})")
                ctx.fail("embeddings.order", f"inputs {i} and {j} are the same text, but their "
                         f"embeddings are not each other's nearest: {why} (a batch answered "
                         f"out of order)", index=where, expected=f"data[{i}] ≈ data[{j}]",
                         seen=round(same, 4))
                return


DISCOVERY_CHECKS = (check_models_list, check_embeddings)
