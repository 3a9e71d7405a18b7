"""JSON mode for Responses requests (issue 45 item 2): OpenAI's Responses API asks for it with
``text: {"format": {"type": "json_object"}}``, as chat does with ``response_format``
(``fields.py`` draws chat's).

Owns :func:`with_json_mode`, which gives some of a run's valid and sequence
``responses.create`` drafts JSON mode: a request without ``tools`` (an answer that calls a tool tells nothing of JSON mode) and
without a ``text`` of its own gets the format, and instructions that ask for JSON (OpenAI
refuses JSON mode unless the input mentions JSON). Which ones is dealt from a generator of its
own, so no other draw of a seed moves. ``response-format.json`` (``checks/request_fields.py``)
judges the answers.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Sequence
from typing import Any, Final

from nnrp_conformance import contract
from nnrp_conformance.generate.fields import JSON_INSTRUCTION
from nnrp_conformance.generate.strategies import FAMILY_SEQUENCE, FAMILY_VALID, Draft

__all__ = ["JSON_FORMAT", "JSON_MODE_CHANCE", "with_json_mode"]

#: the Responses API's JSON mode
JSON_FORMAT: Final = {"format": {"type": "json_object"}}
#: the chance that a valid or sequence Responses request without tools asks for JSON mode
#: (seed 1 at 200 cases and Levels 1-3: 13 requests, 5 of them answered whole)
JSON_MODE_CHANCE: Final = 1 / 2
_FAMILIES: Final = frozenset({FAMILY_VALID, FAMILY_SEQUENCE})


def with_json_mode(drafts: Sequence[Draft], seed: int) -> list[Draft]:
    """``drafts`` with some valid Responses requests in JSON mode (module doc)."""
    rng = random.Random(f"json-mode-{seed}")
    out = []
    for draft in drafts:
        if draft.family in _FAMILIES and draft.operation == contract.OP_RESPONSES_CREATE \
                and "tools" not in draft.body and "text" not in draft.body \
                and rng.random() < JSON_MODE_CHANCE:
            body: dict[str, Any] = {**draft.body, "text": copy.deepcopy(JSON_FORMAT),
                                    "instructions": JSON_INSTRUCTION}
            draft = dataclasses.replace(draft, body=body)
        out.append(draft)
    return out
