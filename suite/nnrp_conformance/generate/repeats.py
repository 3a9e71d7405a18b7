"""Requests related to an earlier one (issue 45 item 3, in the manner of metamorphic testing):
the same valid request sent again, and sent again with ``user`` added or taken away.

Owns :func:`related`, which turns some of a run's drawn drafts into relation groups: an
earlier valid chat or Responses request is made deterministic (``temperature`` 0, and a
``seed`` for chat, whose API defines one), and the next two valid requests of its operation
become its repeats: the same body (change ``none``), then the same body with ``user`` added,
or taken away when it had one (``user-added``, ``user-removed``). The count of cases and
every other draw of the seed stay as they were: which requests start a group is dealt from a
generator of its own, and a repeat takes the place of a drawn request (its envelope stays its
own, so it is another request_id, or none). A group's third repeat is the same body again on
a session of its own (``another-session``: the runner opens a fresh session for it,
``run_cases.py``), so the relations are judged across sessions as well as on one (issue 45
item 3): an answer that follows the session (a sampler seeded from it, ids numbered per
session) differs there and nowhere else.

``checks/repeats.py`` judges the answers; a repeat's recipe names the case it repeats
(``generated.repeats``).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Sequence
from typing import Any, Final

from nnrp_conformance import contract
from nnrp_conformance.checks.same_answers import CHANGE_ANOTHER_SESSION
from nnrp_conformance.generate.strategies import FAMILY_VALID, Draft

__all__ = ["CHANGES", "GROUP_CHANCE", "deterministic", "related"]

#: what a repeat changes of the request it repeats
CHANGE_NONE: Final = "none"
CHANGES: Final = (CHANGE_NONE, "user-added", "user-removed", CHANGE_ANOTHER_SESSION)
#: the chance that a valid request starts a group (three more valid requests of its
#: operation become its repeats): in 120 cases about 4 groups
GROUP_CHANCE: Final = 1 / 6
#: the operations whose answers are text a request decides
_RELATED: Final = frozenset({contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_RESPONSES_CREATE})
_USER: Final = "user-relation"


def deterministic(operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` at temperature 0, with a seed where the operation's API defines one (chat)."""
    out = {**copy.deepcopy(body), "temperature": 0}
    if operation == contract.OP_CHAT_COMPLETIONS_CREATE:
        out.setdefault("seed", 0)
    return out


def _with_user_changed(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if "user" in body:
        return {k: v for k, v in body.items() if k != "user"}, "user-removed"
    return {**copy.deepcopy(body), "user": _USER}, "user-added"


def related(drafts: Sequence[Draft], seed: int) -> list[Draft]:
    """``drafts`` with some valid ones turned into relation groups (module doc)."""
    rng = random.Random(f"repeats-{seed}")
    out = list(drafts)
    #: operation -> (the group's first index, how many repeats it has)
    open_groups: dict[str, tuple[int, int]] = {}
    for i, draft in enumerate(out):
        if draft.family != FAMILY_VALID or draft.operation not in _RELATED:
            continue
        group = open_groups.get(draft.operation)
        if group is None:
            # a group starts on a request without tools: its answer is text, which the
            # request decides word by word (a call's arguments say less)
            if "tools" not in draft.body and rng.random() < GROUP_CHANCE:
                out[i] = dataclasses.replace(
                    draft, body=deterministic(draft.operation, draft.body))
                open_groups[draft.operation] = (i, 0)
            continue
        first, repeats = group
        body = copy.deepcopy(out[first].body)
        change = CHANGE_NONE
        if repeats == 1:
            body, change = _with_user_changed(body)
        if repeats == 2:  # the group's last: the same body on a session of its own
            change = CHANGE_ANOTHER_SESSION
            del open_groups[draft.operation]
        else:
            open_groups[draft.operation] = (first, repeats + 1)
        out[i] = dataclasses.replace(draft, body=body, repeats=(first, change))
    return out
