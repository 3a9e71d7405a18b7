"""The suite's NNRP client: one connection, one session, many operations, every frame kept.

Owns the client end of the wire (spec §3) on nnrp-py: connect, submit envelopes (or
deliberately malformed frames), iterate each operation's events with receive timestamps,
real FRAME_CANCEL, per-operation timeouts, the discovery operation, and the wire-level
findings the suite's checks read (``Operation.wire_findings``).

Rooms: ``connection`` (:class:`NnrpClient`: connect, submit, close), ``operation`` (what the
caller reads of one operation), ``pump`` (the thread that owns the session), ``frames``
(routing each frame to its operation), ``records`` (what they all share, below them all:
the records an operation yields and the calls it makes into its connection), ``refused`` (frames nnrp-py refused after an
operation's terminal, and which operation they belong to).

Threading (docs/wire-pump.md): nnrp-py's calls block and are serialised per session, so
one pump thread owns the session. It runs submit/cancel/close commands between polls,
polls one event at a time (a multi-event poll lingers 2-3 ms and loses the whole batch on
a stale event) only while operations are in flight, decodes and timestamps each frame
and hands it to the operation's async iterator. Nothing here can hang: every wait is
bounded, and a flood is capped per operation.
"""

from __future__ import annotations

from nnrp_conformance.wire.codec import RawFrame

from .connection import NnrpClient
from .operation import Operation
from .records import NnrpClientError, ReceivedEvent, Terminal

__all__ = ["NnrpClient", "NnrpClientError", "Operation", "RawFrame", "ReceivedEvent", "Terminal"]
