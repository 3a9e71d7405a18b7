"""The minimal endpoint's multiplexing defects: operations in flight together, on one session
or on two, that do not stay apart. Each is one defect of the registry (``defects.py``); with
none of them switched on, every open operation streams and ends on its own.

``endpoint.Session`` calls these at the places an operation's stream can touch a neighbour's:
starting it (``register``), sending a partial (``cross_talk``), pushing a terminal
(``swap_terminal`` before, ``end_neighbours`` after an error), and answering a client cancel
(``end_neighbours``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

CROSS_TALK = "cross-talk"
SWAPPED_TERMINALS = "swapped-terminals"
CANCEL_ENDS_OTHERS = "cancel-ends-others"
ERROR_ENDS_NEIGHBOURS = "error-ends-neighbours"
FRAME_ID_REGISTRY = "frame-id-registry"

#: frame-id-registry: every open operation of the process by its frame id alone (a key each
#: session numbers anew), as a server that keeps one table of streams for all its sessions
_BY_FRAME_ID: dict[int, list[Any]] = {}


def register(session: Any, state: Any) -> None:
    """frame-id-registry: ``state`` joins the process-wide table under its frame id."""
    if session.config.defect == FRAME_ID_REGISTRY:
        # what has ended leaves the table (it would grow with every frame id of a long run)
        for frame_id, states in list(_BY_FRAME_ID.items()):
            open_ = [s for s in states if not s.finished]
            if open_:
                _BY_FRAME_ID[frame_id] = open_
            else:
                del _BY_FRAME_ID[frame_id]
        _BY_FRAME_ID.setdefault(state.op.frame_id, []).append(state)


def _is_text_delta(item: Any) -> bool:
    if not isinstance(item, bytes):
        return False
    try:
        event = json.loads(item)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("type") == "response.output_text.delta"


def _others(session: Any, state: Any) -> list[Any]:
    return [s for s in session.ops.values() if s is not state and not s.finished]


def _sharing_frame_id(state: Any) -> list[Any]:
    """The other open operations the process-wide table keeps under ``state``'s frame id."""
    return [s for s in _BY_FRAME_ID.get(state.op.frame_id, ())
            if s is not state and not s.finished]


def cross_talk(session: Any, state: Any, item: Any) -> list[Any]:
    """cross-talk: once per operation, after its first event, the next text delta of another
    open stream of the session goes out on this operation's frame too (that stream never
    sends it). frame-id-registry: the same, from an open stream of any session with the same
    frame id (they read one queue)."""
    defect = session.config.defect
    if defect not in (CROSS_TALK, FRAME_ID_REGISTRY) or state.sent < 1 \
            or state.extra.get("crossed") or not _is_text_delta(item):
        return [item]
    others = _others(session, state) if defect == CROSS_TALK else _sharing_frame_id(state)
    for other in others:
        stolen = next(other.events, None)
        if _is_text_delta(stolen):
            state.extra["crossed"] = True
            return [stolen, item]
        if stolen is not None:  # not a text delta: give it back to its own stream
            other.events = itertools.chain([stolen], other.events)
    return [item]


def swap_terminal(session: Any, state: Any) -> None:
    """swapped-terminals: the first stream to end takes the final body of another open stream,
    which ends with this one's in turn."""
    if session.config.defect != SWAPPED_TERMINALS or state.extra.get("swapped") \
            or not state.sent or not _completed(state):
        return
    for other in _others(session, state):
        if other.sent and _completed(other) and not other.extra.get("swapped"):
            state.plan.terminal, other.plan.terminal = other.plan.terminal, state.plan.terminal
            state.extra["swapped"] = other.extra["swapped"] = True
            return


def _completed(state: Any) -> bool:
    terminal = state.plan.terminal
    return isinstance(terminal, dict) and terminal.get("type") == "response.completed"


async def end_neighbours(session: Any, state: Any, *, event: dict[str, Any] | None = None,
                         status: int = 0) -> None:
    """cancel-ends-others (``event`` None: a client cancel of ``state``): every other open
    operation is dropped cancelled too. error-ends-neighbours (``event``: the error ``state``
    ended with): every other open operation ends with the same error."""
    defect = session.config.defect
    if event is None and defect == CANCEL_ENDS_OTHERS:
        for other in _others(session, state):
            await session.drop_cancelled(other, "client")
    elif event is not None and defect == ERROR_ENDS_NEIGHBOURS \
            and event.get("type") == "response.error":
        others = _others(session, state)
        for other in others:
            other.finished = True  # ended here: their own pushes end no further neighbour
        for other in others:
            await session.push(other, event, status)
