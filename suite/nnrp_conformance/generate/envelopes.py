"""The envelope a valid generated request is sent in (profile design §6), varied as §6 allows.

Every fixed recipe sends the same envelope: a ``request_id`` and no ``nnrp`` member. §6 makes
both optional — "``request_id`` | Optional | Client-provided correlation id. When absent, the
adapter may derive one from the NNRP frame id." and "``nnrp`` | Optional | NNRP-specific
policy and diagnostics hints. These fields must not be forwarded into the OpenAI-compatible
body." — and its example sends ``"nnrp": {"timeout_ms": 30000, "diagnostics": true}``. A
valid request in any of these envelopes is still a valid request: an endpoint that refuses
one because ``request_id`` is absent, or that forwards the hints into the body and fails on
them, fails the case's ``expect.success`` like any other valid request it refuses.

Owns :data:`ENVELOPES` (each shape: its name, what it changes, and the recipe members that
send it) and :func:`request_members`. Which shape a valid or sequence case gets is dealt in
shuffled rounds from the run's seed (``strategies.slots``), on a deck of its own, so adding
the deck moved no other choice of a seed. Invalid envelopes are mutations
(``mutations.py``: ``envelope-*``), judged by §6.1 and §10's rows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

__all__ = ["AS_RECIPES", "ENVELOPES", "EnvelopeShape", "request_members"]


@dataclass(frozen=True)
class EnvelopeShape:
    description: str
    #: the ``request.nnrp`` member (None: the envelope carries no ``nnrp``)
    nnrp: dict[str, Any] | None = None
    #: envelope fields left out (``request.envelope.omit``)
    omit: tuple[str, ...] = field(default=())


#: §6's example hints, verbatim
SECTION_6_HINTS: Final = MappingProxyType({"timeout_ms": 30000, "diagnostics": True})
#: what the fixed recipes send
AS_RECIPES = "request-id"

ENVELOPES: Final = MappingProxyType({
    AS_RECIPES: EnvelopeShape("a request_id and no nnrp member, as the fixed recipes send"),
    "no-request-id": EnvelopeShape("no request_id (§6: optional, the adapter may derive one)",
                                   omit=("request_id",)),
    "diagnostics-hint": EnvelopeShape("the nnrp hint diagnostics: true",
                                      nnrp={"diagnostics": True}),
    "section-6-hints": EnvelopeShape("§6's example hints, nnrp: {timeout_ms: 30000, "
                                     "diagnostics: true}", nnrp=dict(SECTION_6_HINTS)),
    "no-request-id-section-6-hints": EnvelopeShape(
        "no request_id, and §6's example hints", nnrp=dict(SECTION_6_HINTS),
        omit=("request_id",)),
})


def request_members(name: str) -> dict[str, Any]:
    """The recipe ``request`` members (``nnrp``, ``envelope``) that send shape ``name``."""
    shape = ENVELOPES[name]
    out: dict[str, Any] = {}
    if shape.nnrp is not None:
        out["nnrp"] = copy.deepcopy(shape.nnrp)
    if shape.omit:
        out["envelope"] = {"omit": list(shape.omit)}
    return out
