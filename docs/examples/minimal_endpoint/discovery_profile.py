"""The discovery side of the minimal endpoint: the capability document
(``nnrp.capabilities.get``) of each ``--levels`` claim, and the Level 3 operations
``models.list`` and ``embeddings.create`` (docs/levels.md#models-list, #embeddings).

The two Level 3 operations answer with a single ``response.completed`` and no partial results.  The embeddings are
fake but deterministic: a text's SHA-256 in counter mode, expanded to the requested number of
dimensions and normalised to length 1.  Identical inputs get identical vectors; different
inputs get vectors that are nearly orthogonal, as a real model's unrelated texts would.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from types import MappingProxyType
from typing import Any, Final

from envelope import (
    ADAPTER,
    OP_CHAT,
    OP_EMBEDDINGS,
    OP_MODELS,
    OP_RESPONSES,
    PROFILE,
    SCHEMA_VERSION,
    Plan,
    ProfileError,
    is_int,
)

#: the served model's "created" (a fixed time: the list is the same on every call)
MODEL_CREATED = 1764892800
DEFAULT_DIMENSIONS = 384
MAX_DIMENSIONS = 4096
MAX_INPUTS = 2048
ENCODINGS = ("float", "base64")


#: the capability document's entry of each profile operation (docs/levels.md): the answers
#: of models.list and embeddings.create are single results, never streamed or cancelled
OPERATION_FLAGS: Final = MappingProxyType({
    OP_CHAT: {"streaming": True, "non_streaming": True, "tool_calls": True, "cancellation": True},
    OP_RESPONSES: {"streaming": True, "non_streaming": True, "tool_calls": True,
                   "cancellation": True},
    OP_MODELS: {"streaming": False, "non_streaming": True, "tool_calls": False,
                "cancellation": False},
    OP_EMBEDDINGS: {"streaming": False, "non_streaming": True, "tool_calls": False,
                    "cancellation": False},
})
#: the operations a level adds to the ones below it (profile §4: a higher level includes them)
LEVEL_OPERATIONS: Final = MappingProxyType(
    {1: (OP_CHAT,), 2: (OP_RESPONSES,), 3: (OP_MODELS, OP_EMBEDDINGS)}
)


def capability_document(model: str, defect: str | None = None, levels: int = 1) -> dict[str, Any]:
    """The document of an endpoint serving every operation of ``levels`` and the ones below."""
    names = [op for level in range(1, levels + 1) for op in LEVEL_OPERATIONS[level]]
    claimed = list(range(1, levels + 1))
    if defect == "capability-lies" and levels == 1:
        claimed, names = [1, 2], [*names, OP_RESPONSES]
    return {
        "profile": PROFILE,
        "schema_version": SCHEMA_VERSION,
        "adapter": ADAPTER,
        "compatibility_levels": claimed,
        "operations": [{"name": name, **OPERATION_FLAGS[name]} for name in names],
        "models": [{"id": model, "owned_by": ADAPTER}],
    }



def _invalid(message: str) -> ProfileError:
    return ProfileError("invalid_request", message)


def _served(body: dict[str, Any], model: str, what: str) -> None:
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise _invalid(f"{what} body needs a 'model' string")
    if name != model:
        # A backend that rejects a model it does not serve (the recipes' "backend-error").
        raise ProfileError("backend_error", f"model {name!r} is not served here")


def plan_models(body: dict[str, Any], *, op_id: int, request_id: str, model: str,
                defect: str | None) -> Plan:
    """The model list: the capability document's one model (OpenAI ignores any member)."""
    entry: dict[str, Any] = {"id": model, "object": "model", "created": MODEL_CREATED,
                             "owned_by": ADAPTER}
    if defect == "models-bad-body":
        entry = {"id": model, "created": MODEL_CREATED}  # neither object nor owned_by
    data = [] if defect == "models-omit-served" else [entry]
    return Plan(partials=(), terminal={"type": "response.completed",
                                       "body": {"object": "list", "data": data}})


def _inputs(body: dict[str, Any]) -> list[str | list[int]]:
    """The inputs as texts or token arrays; anything else is invalid_request (OpenAI 400)."""
    value = body.get("input")
    if isinstance(value, str) or (isinstance(value, list) and value and all(map(is_int, value))):
        value = [value]  # one text, or one token array
    if not isinstance(value, list) or not value:
        raise _invalid("'input' must be a non-empty string or a non-empty array of them")
    if len(value) > MAX_INPUTS:
        raise _invalid(f"'input' has {len(value)} entries; the limit is {MAX_INPUTS}")
    for i, text in enumerate(value):
        tokens = isinstance(text, list) and text and all(map(is_int, text))
        if not (tokens or (isinstance(text, str) and text)):
            raise _invalid(f"input[{i}] must be a non-empty string or token array")
    return value


def _dimensions(body: dict[str, Any]) -> int:
    dims = body.get("dimensions")
    if dims is None:
        return DEFAULT_DIMENSIONS
    if not is_int(dims) or not 1 <= dims <= MAX_DIMENSIONS:
        raise _invalid(f"'dimensions' must be an integer from 1 to {MAX_DIMENSIONS}")
    return dims


def embed(text: str | list[int], dims: int) -> list[float]:
    """A unit vector of ``dims`` numbers that depends on ``text`` only."""
    key = text if isinstance(text, str) else json.dumps(text)
    values: list[float] = []
    for block in range(-(-dims // 8)):
        digest = hashlib.sha256(f"{block}\x00{key}".encode()).digest()
        values += [n / 2**31 - 1.0 for n in struct.unpack("<8I", digest)]
    values = values[:dims]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [round(v / norm, 8) for v in values]


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "base64":  # OpenAI: little-endian float32
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector


def plan_embeddings(body: dict[str, Any], *, op_id: int, request_id: str, model: str,
                    defect: str | None) -> Plan:
    """One embedding per input, in input order (``data[i].index == i``)."""
    inputs = _inputs(body)
    dims = _dimensions(body)
    encoding = body.get("encoding_format", "float")
    if encoding not in ENCODINGS:
        raise _invalid(f"'encoding_format' must be one of {list(ENCODINGS)}")
    if body.get("stream") is not None and body["stream"] is not False:
        raise _invalid("embeddings have no stream")
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise _invalid("'user' must be a string")
    _served(body, model, "embeddings")
    vectors = [embed(text, dims) for text in inputs]
    if defect == "embeddings-reversed":
        vectors.reverse()  # each vector is right, but answers another position's input
    if defect == "embeddings-unequal-dims" and vectors:
        vectors[-1] = vectors[-1][:-1] or [1.0, 0.0]
    data: list[dict[str, Any]] = [
        {"object": "embedding", "index": i, "embedding": _encoded(v, encoding)}
        for i, v in enumerate(vectors)
    ]
    if defect == "embeddings-missing-index":
        del data[0]["index"]
    if defect == "embeddings-wrong-count":
        data = data[:-1] if len(data) > 1 else data * 2
    tokens = sum(len(t.split()) if isinstance(t, str) else len(t) for t in inputs)
    answer = {"object": "list", "data": data, "model": model,
              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
    # One generation step per input, so timeouts and cancels apply as to the other operations.
    return Plan(partials=[None] * len(inputs),
                terminal={"type": "response.completed", "body": answer})
