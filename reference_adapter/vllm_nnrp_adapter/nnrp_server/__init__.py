"""The adapter's NNRP server binding on nnrp-py: frames in, profile events out.
May import: `profile`.

Rooms: ``server`` (listener, accept thread, lifecycle, the shared poll budget; the only room
that knows both sides), ``pump`` (one thread per session), ``operations`` (the policy for one
operation), ``sides`` (the pump and the loop's side as each sees the other, so neither imports
the other), ``operation`` (what a handler is given and the state the loop and the pump share),
``hints`` (the envelope's ``nnrp`` member as the binding acts on it), ``terminal`` (an
operation's one terminal as frames), ``sdk`` (the only module that touches nnrp-py's private
entry points).

Owns: listening (tcp default; ipc/ws by scheme), per-session pump threads, checking
each FRAME_SUBMIT against the wire mapping (spec §3; violations get the profile error
terminal), running the async handler per operation, pushing each yielded event as one
PARTIAL_RESULT then exactly one terminal, and cancellation (client cancel, envelope
``nnrp.timeout_ms``, the ``nnrp.cancel_after_events`` hint, disconnect, shutdown) with the
abort hook and diagnostics. Envelope *schema* validation belongs to the handler.

Pumping (docs/wire-pump.md): nnrp-py serialises calls per session and has no wakeable
poll (an idle poll blocks sends ~2 ms), so one thread per session owns the session: it
sends whatever the handlers queued and polls only when the next event is not imminent
(right after a send on a slow stream, every ``hot_poll_interval_ms`` on a fast one, and
continuously when no operation is in flight). The sessions with work in flight share one
budget of polls a second (``busy_poll_budget_per_s``), so thousands of sessions waiting on the
engine do not spend its CPU on polls. Handlers run on the caller's event loop;
a bounded per-operation queue between them and the pump is the flow control.
"""

from __future__ import annotations

from .operation import AbortHook, CancelInfo, Handler, OperationContext
from .server import NnrpServer

__all__ = ["AbortHook", "CancelInfo", "Handler", "NnrpServer", "OperationContext"]
