"""The second HTTP call the relations need (issue 45 item 5): a generated request and its
repeat got different answers over NNRP (``answer.repeatable``, ``answer.user-neutral``:
``checks/same_answers.py``); the twin sends both bodies to the provider's HTTP API as well and
says whether that API answers them alike.

That tells two things apart that the NNRP answers alone cannot: the model itself answers the
pair differently (over HTTP too: the serving engine is not deterministic, whatever the NNRP
face does), or only the NNRP face does (its HTTP API answers the pair alike: the NNRP side
adds the difference). Both bodies are sent one after the other, as the NNRP run sent them;
each answer is read as the twin reads any (``answers.from_http``: every choice's text, tool
calls and finish, ``answer_reading.py``'s reading), and compared choice by choice as the
relation compares the NNRP answers. Nothing here judges: the relation's finding says what the
HTTP API did, and the result's diagnostics keep both HTTP answers.

Owns :func:`pair_over_http`.
"""

from __future__ import annotations

from typing import Any

from nnrp_conformance.answer_reading import CHOICE_FIELDS
from nnrp_conformance.twin.answers import SUCCESS, from_http
from nnrp_conformance.twin.http import route_for, send

__all__ = ["pair_over_http"]


async def pair_over_http(client: Any, url: str, operation: str, bodies: tuple[Any, Any], *,
                         timeout: float) -> dict[str, Any]:
    """Both ``bodies`` sent to the HTTP API at ``url``: ``{"same": True / False, "http":
    [answer, answer]}``, or ``{"same": None, "why": ...}`` when it could not tell."""
    if route_for(operation) is None:
        return {"same": None, "why": f"{operation} has no HTTP path"}
    views = []
    for body in bodies:
        answer = from_http(operation, await send(client, url, operation, body,
                                                 timeout=timeout))
        if answer.outcome != SUCCESS:
            why = "no answer" if answer.outcome is None else f"an error: {answer.error_raw}"
            return {"same": None, "why": f"the HTTP API gave {why}"}
        choices = answer.choices or {0: answer.fields}  # a Response is one choice
        views.append({f"choice {i}": {k: choice.get(k) for k in CHOICE_FIELDS}
                      for i, choice in choices.items()})
    return {"same": views[0] == views[1], "http": views}
