"""OpenAI's own request shapes in generated requests (generate/openai_shapes.py, issue 45 item 4):
the file is what the pinned SDK gives, every value drawn from it is valid against its schema,
and every request field of the three APIs is drawn, by hand or from the shapes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from nnrp_conformance import contract
from nnrp_conformance.generate import openai_shapes as shapes
from nnrp_conformance.generate.run import draw
from nnrp_conformance.generate.strategies import Claim

REPO = Path(__file__).resolve().parents[2]
OPERATIONS = (contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_RESPONSES_CREATE,
              contract.OP_EMBEDDINGS_CREATE)
SHAPES = json.loads((REPO / "suite/nnrp_conformance/generate/openai_shapes.json").read_text())


def test_the_shapes_are_what_the_pinned_sdk_gives() -> None:
    """``scripts/openai-shapes --check`` with the dev venv's SDK (pinned in pyproject.toml):
    a stale file, or an SDK upgrade without writing it again, fails here."""
    pytest.importorskip("openai", reason="the dev extra installs the pinned openai SDK")
    done = subprocess.run([sys.executable, str(REPO / "scripts/openai-shapes"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert SHAPES["source"].startswith("openai ")
    pins = (REPO / "pyproject.toml").read_text()
    assert f'"openai=={SHAPES["source"].split()[1]}"' in pins


def _schemas() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for op in OPERATIONS:
        for name in shapes.extra_fields(op):
            out.append((op, name, SHAPES["operations"][op]["fields"][name]["schema"]))
        for part in shapes.content_part_types(op):
            out.append((op, f"part:{part}", SHAPES["operations"][op]["content_parts"][part]))
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize(("operation", "name", "schema"), _schemas(),
                         ids=[f"{op.split('.')[0]}-{n}" for op, n, _x in _schemas()])
def test_every_drawn_value_is_valid_against_the_sdk_schema(
        operation: str, name: str, schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    for seed in range(40):
        rng = random.Random(seed)
        value = shapes.content_part(operation, name[5:], rng) if name.startswith("part:") \
            else shapes.field_value(operation, name, rng)
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, (seed, value, errors)
        for text in _strings(value):  # a recipe parameter, or text UTF-8 cannot carry
            assert "$" not in text
            text.encode("utf-8")


def test_the_shapes_bring_the_fields_no_strategy_draws_by_hand() -> None:
    chat = shapes.extra_fields(contract.OP_CHAT_COMPLETIONS_CREATE)
    assert {"logprobs", "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty",
            "parallel_tool_calls", "service_tier", "audio"} <= set(chat)
    assert not set(chat) & shapes.HAND_DRAWN
    # fields.py draws these by hand, with the semantics their oracles judge
    assert not set(chat) & {"n", "response_format", "user"}
    assert {"dimensions", "user"} <= set(shapes.extra_fields(contract.OP_EMBEDDINGS_CREATE))
    assert {"image_url", "input_audio", "file", "text"} <= \
        set(shapes.content_part_types(contract.OP_CHAT_COMPLETIONS_CREATE))
    assert {"input_text", "input_image", "input_file"} <= \
        set(shapes.content_part_types(contract.OP_RESPONSES_CREATE))


def test_every_request_field_of_the_three_apis_is_drawn() -> None:
    """Drawn by hand (HAND_DRAWN) or from the shapes: 450 drafts of one seed carry every
    field of each operation's SDK type but those an operation cannot take by hand (chat has
    no ``input``, …) and a content part of every type."""
    claims = [Claim(op, streaming=op != contract.OP_EMBEDDINGS_CREATE,
                    tool_calls=op != contract.OP_EMBEDDINGS_CREATE) for op in OPERATIONS]
    seen: dict[str, set[str]] = {op: set() for op in OPERATIONS}
    parts: dict[str, set[str]] = {op: set() for op in OPERATIONS}
    for draft in draw(claims, "m", 450, 3):
        seen[draft.operation].update(draft.body)
        for text in _content_lists(draft.body):
            parts[draft.operation].update(p.get("type") for p in text if isinstance(p, dict))
    for op in OPERATIONS:
        fields = set(SHAPES["operations"][op]["fields"])
        missing = fields - seen[op]
        assert not missing, f"{op}: never drawn: {sorted(missing)}"
        assert set(shapes.content_part_types(op)) <= parts[op], op


def _content_lists(body: dict[str, Any]) -> list[list[Any]]:
    items = body.get("messages") or (body.get("input") if isinstance(body.get("input"), list)
                                     else [])
    return [m["content"] for m in items if isinstance(m, dict)
            and isinstance(m.get("content"), list)]


def test_a_part_goes_into_the_last_message_and_fields_beside_the_others() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    part = shapes.Use("part", ("image_url",), 1)
    with_part = shapes.with_use(part, contract.OP_CHAT_COMPLETIONS_CREATE, chat)
    first, second = with_part["messages"][-1]["content"]
    assert first == {"type": "text", "text": "hi"} and second["type"] == "image_url"
    assert chat["messages"][-1]["content"] == "hi"  # a copy
    fields = shapes.Use("fields", ("n", "user", "model"), 1)
    added = shapes.with_use(fields, contract.OP_CHAT_COMPLETIONS_CREATE, chat)
    assert added["model"] == "m" and {"n", "user"} <= set(added)  # a set field keeps its value
    assert shapes.with_use(None, contract.OP_CHAT_COMPLETIONS_CREATE, chat) is chat
    responses = shapes.with_use(shapes.Use("part", ("input_image",), 2),
                                contract.OP_RESPONSES_CREATE, {"model": "m", "input": "hi"})
    (message,) = responses["input"]
    assert message["content"][0] == {"type": "input_text", "text": "hi"}
    assert message["content"][1]["type"] == "input_image"
    # the same use, the same values: a saved request draws nothing again
    assert shapes.with_use(fields, contract.OP_CHAT_COMPLETIONS_CREATE, chat) == added


def test_the_decks_deal_every_field_and_part_in_turn() -> None:
    decks = shapes.Decks(7)
    chat = contract.OP_CHAT_COMPLETIONS_CREATE
    uses = [decks.use(chat) for _ in range(40)]
    names = [n for u in uses if u is not None and u.kind == "fields" for n in u.names]
    parts = [u.names[0] for u in uses if u is not None and u.kind == "part"]
    assert set(names) == set(shapes.extra_fields(chat))
    assert set(parts) == set(shapes.content_part_types(chat))
    embeddings = [shapes.Decks(7).use(contract.OP_EMBEDDINGS_CREATE) for _ in range(8)]
    assert all(u is None or u.kind == "fields" for u in embeddings)  # it has no parts
