"""A minimal third-party NNRP endpoint of the `openai-compatible/1` profile, on nnrp-py alone.

This module owns the NNRP side: listening, one polling loop per session, decoding the
request frame, streaming partial results, terminals, client cancels, timeouts and closing.
The profile side (envelope, events, the deterministic "model") is ``chat_profile``; Level 2
(``responses.create``) is ``responses_profile``, Level 3 (``models.list``,
``embeddings.create``) ``discovery_profile``, served with ``--levels 2`` or ``--levels 3``
(default 1: chat only, the claim of ``manifest.json``); the fault-injection switch
(``--defect NAME``) is ``defects``, its multiplexing defects ``neighbours``.

    python endpoint.py --listen 127.0.0.1:0 [--model NAME] [--levels N] [--defect NAME]
    python endpoint.py --listen ipc:///tmp/endpoint.sock     # or ws://127.0.0.1:0
    python endpoint.py --list-defects

The first stdout line is ``LISTENING <target>`` once the endpoint accepts sessions
(``127.0.0.1:<port>`` over TCP, ``unix:///PATH`` or ``ws://127.0.0.1:<port>/`` otherwise: a
target the suite takes as is); SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import admission
import anyio
import chat_profile
import neighbours
from accepting import Acceptor
from chat_profile import (
    OP_CAPABILITIES,
    OP_EMBEDDINGS,
    OP_MODELS,
    OP_RESPONSES,
    Plan,
    Planner,
    cancelled_event,
    encode,
    error_plan,
)
from defects import DEFECTS, check_defect
from discovery_profile import plan_embeddings, plan_models
from nnrp import StreamSemantics
from nnrp.core import (
    MessageType,
    PayloadKind,
    ResultClass,
    ResultPushMetadata,
    TransportPolicy,
    build_result_push_typed_payload_packet,
    build_typed_payload_frame,
    unpack_body,
    unpack_typed_payload_frames,
)
from nnrp.native import NativeRuntimeError, NativeWouldBlockError
from nnrp.runtime import (
    OperationState,
    PartialResultMetadata,
    ResultDropReasonCode,
    ResultDropReasonMetadata,
    RuntimeRole,
)
from nnrp.server import (
    NativeServerBootstrapOptions,
    NativeServerEventKind,
    NativeServerProviderRoute,
    listen_native_server,
)
from responses_profile import plan_responses
from variants import VARIANTS, check_variant, restyle, serves_discovery

#: events sent per operation between two polls, so a cancel is seen within one slice
SLICE_EVENTS = 4
#: poll wait while operations stream / while idle (a poll blocks sends on its session)
BUSY_POLL_S = 0.001
IDLE_POLL_S = 0.02
#: a dead peer makes every poll fail at once; this many failures in a row end the session
DEAD_PEER_POLLS = 200
#: one accept's wait: how soon a stop is noticed while nobody connects
ACCEPT_SLICE_MS = 200
#: the operations each level adds to chat (docs/levels.md#claims)
LEVEL_PLANNERS: dict[int, dict[str, Planner]] = {
    2: {OP_RESPONSES: plan_responses},
    3: {OP_MODELS: plan_models, OP_EMBEDDINGS: plan_embeddings},
}


def set_tcp_nodelay() -> int:
    """Set TCP_NODELAY on this process's connected TCP sockets.

    nnrp-py's TCP carrier leaves Nagle on, which stalls every second frame of a stream by
    ~40 ms.  The sockets belong to the native runtime, so the option is set through a dup
    of each descriptor (Linux /proc); the original descriptor is left untouched.
    """
    count = 0
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for name in names:
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            dup = os.dup(int(name))
        except OSError:
            continue
        sock = socket.socket(fileno=dup)
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                sock.getpeername()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                count += 1
        except OSError:
            pass
        finally:
            sock.close()
    return count


def log(message: str) -> None:
    print(f"[minimal-endpoint] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Config:
    model: str
    defect: str | None
    delta_delay_s: float
    variant: str | None = None
    levels: int = 1

    def planners(self) -> dict[str, Planner]:
        """The planners of the operations above Level 1 that this endpoint serves."""
        out: dict[str, Planner] = {}
        for level in range(2, self.levels + 1):
            out.update(LEVEL_PLANNERS[level])
        return out


def decode_request(op: Any, defect: str | None) -> bytes | Plan:
    """The envelope bytes of a FRAME_SUBMIT, or an error plan when the frame breaks §6.1."""
    metadata = op.submit.metadata.value
    try:
        view = unpack_body(op.submit.tail.body)
        frames = unpack_typed_payload_frames(
            view.typed_payload_descriptor_region,
            view.typed_payload_frame_region,
            payload_kind_bitmap=metadata.payload_kind_bitmap,
        )
    except Exception as exc:  # the SDK raises several types for a malformed body
        return error_plan("invalid_request", f"FRAME_SUBMIT body is not a typed payload: {exc}")
    if not frames:
        return error_plan("invalid_request", "FRAME_SUBMIT carries no typed payload frame")
    if defect == "accepts-bad-wire":
        return frames[0].payload
    if len(frames) != 1:
        return error_plan(
            "invalid_request", f"FRAME_SUBMIT must carry exactly one typed frame, got {len(frames)}"
        )
    frame = frames[0]
    wrong = []
    if frame.payload_kind != PayloadKind.STRUCTURED_EVENT:
        wrong.append(f"payload kind {int(frame.payload_kind)} (want 16 structured_event)")
    if frame.profile_id or frame.schema_id or frame.schema_version:
        wrong.append(
            f"profile/schema ids {frame.profile_id}/{frame.schema_id}/{frame.schema_version}"
            " (want 0/0/0)"
        )
    if int(frame.stream_semantics) != StreamSemantics.SNAPSHOT:
        wrong.append(f"stream semantics {int(frame.stream_semantics)} (want 1 snapshot)")
    if wrong:
        return error_plan("invalid_request", "request frame: " + "; ".join(wrong))
    return frame.payload


@dataclass
class OpState:
    op: Any
    plan: Plan
    events: Iterator[bytes | None]
    deadline: float | None
    next_due: float
    sent: int = 0
    finished: bool = False  # a terminal went out (or the session gave up on it)
    exhausted: bool = False  # nothing left to send, but no terminal (defects only)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def streaming(self) -> bool:
        return not (self.finished or self.exhausted)


class Session:
    """One NNRP session: a single loop that polls, then advances every open operation."""

    def __init__(self, ssess: Any, config: Config, stop: anyio.Event) -> None:
        self.ssess = ssess
        self.config = config
        self.stop = stop
        self.ops: dict[int, OpState] = {}
        self.by_frame: dict[int, int] = {}

    # --- sending -------------------------------------------------------------------------

    def restyled(self, op: Any, body: bytes) -> bytes | None:
        """A conformant variant's way of writing an event (variants.py); None: not sent."""
        if self.config.variant is None:
            return body
        try:
            event = json.loads(body)
        except ValueError:
            return body  # a defect's deliberately broken body stays as it is
        if not isinstance(event, dict):
            return body
        styled = restyle(event, self.config.variant, op.operation_id)
        return None if styled is None else encode(styled)

    async def send_partial(self, state: OpState, body: bytes) -> None:
        op = state.op
        styled = self.restyled(op, body)
        if styled is None:
            return
        body = styled
        seq = state.sent + 1
        metadata = PartialResultMetadata(op.operation_id, seq, 0, seq - 1, len(body), 0)
        await op.send_partial_result(metadata, body)
        state.sent = seq

    async def push(self, state: OpState, event: dict[str, Any], status: int) -> None:
        op = state.op
        state.finished = True
        frame = build_typed_payload_frame(
            PayloadKind.STRUCTURED_EVENT, self.restyled(op, encode(event)) or encode(event),
            stream_semantics=StreamSemantics.SNAPSHOT,
        )
        packet = build_result_push_typed_payload_packet(
            session_id=0, frame_id=op.frame_id, frames=(frame,), status_code=status
        )
        try:
            await op.send_result(ResultPushMetadata.unpack(packet.metadata), packet.body)
        except NativeRuntimeError:
            # The runtime already saw a cancel of this frame: only a drop is accepted now.
            await self.drop_cancelled(state, "client")
            return
        if self.config.defect == "two-terminals":
            await self.second_terminal(state)
        await neighbours.end_neighbours(self, state, event=event, status=status)

    async def push_empty(self, state: OpState) -> None:
        """The empty success terminal: a RESULT_PUSH with zero payload frames (§8.1).
        nnrp-py's typed builder refuses zero frames, so the metadata is written here."""
        op = state.op
        state.finished = True
        metadata = ResultPushMetadata(
            chat_profile.STATUS_OK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            result_class=ResultClass.COMPLETE, payload_kind_bitmap=PayloadKind(0),
            payload_frame_count=0,
        )
        try:
            await op.send_result(metadata, b"")
        except NativeRuntimeError:
            await self.drop_cancelled(state, "client")

    async def second_terminal(self, state: OpState) -> None:
        # The public API refuses a second terminal, so the defect goes one level down.
        op = state.op
        diag = encode(cancelled_event("client"))
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 2, ResultDropReasonCode.PEER_CANCELLED,
            RuntimeRole.SERVER, 0, len(diag),
        )
        try:
            await anyio.to_thread.run_sync(
                op._owner._send_operation_runtime_frame,
                op._handle, op.frame_id, MessageType.RESULT_DROP_REASON, metadata, diag,
            )
        except NativeRuntimeError as exc:
            log(f"two-terminals: second terminal refused by the runtime: {exc}")

    async def drop_invalid_submit(self, state: OpState) -> None:
        """An invalid submit (§6.1) ended at the NNRP level, the profile's preferred mapping
        of a malformed frame (§10): CAPABILITY_MISMATCH, no profile body."""
        op = state.op
        state.finished = True
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, ResultDropReasonCode.CAPABILITY_MISMATCH,
            RuntimeRole.SERVER, 0, 0,
        )
        await op.send_result_drop(metadata, b"")

    async def drop_deadline(self, state: OpState) -> None:
        """An NNRP-level end for an expired deadline: DEADLINE_EXPIRED, no profile body."""
        op = state.op
        state.finished = True
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, ResultDropReasonCode.DEADLINE_EXPIRED,
            RuntimeRole.SERVER, 0, 0,
        )
        await op.send_result_drop(metadata, b"")

    async def drop_cancelled(self, state: OpState, reason: str) -> None:
        op = state.op
        state.finished = True
        code = ResultDropReasonCode.PEER_CANCELLED
        event = encode(cancelled_event(
            reason,
            source=reason,
            operation_id=op.operation_id,
            events_sent=state.sent,
            backend_aborted=True,
        ))
        diag = self.restyled(op, event) or event
        if self.config.defect == "cancel-wrong-drop":
            code, diag = ResultDropReasonCode.BACKPRESSURE, b""
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, code, RuntimeRole.SERVER, 0, len(diag)
        )
        try:
            await op.send_result_drop(metadata, diag)
        except NativeRuntimeError as exc:
            log(f"op {op.operation_id}: drop not delivered ({exc})")

    # --- operations ----------------------------------------------------------------------

    def start(self, op: Any) -> None:
        config = self.config
        request = decode_request(op, config.defect)
        if isinstance(request, Plan):
            plan = request
            plan.extra["invalid_submit"] = True
        elif not serves_discovery(config.variant) and _operation(request) == OP_CAPABILITIES:
            plan = error_plan("unsupported_operation",
                              f"operation {OP_CAPABILITIES!r} is not served here")
        else:
            plan = chat_profile.plan_request(
                request, op_id=op.operation_id, model=config.model, defect=config.defect,
                levels=config.levels, planners=config.planners(),
            )
        plan = admission.admit(self, plan, request)  # session limits (variants)
        now = time.monotonic()
        deadline = None
        if plan.timeout_ms is not None and config.defect != "ignores-timeout":
            deadline = now + plan.timeout_ms / 1000
        state = OpState(op, plan, iter(plan.partials), deadline, next_due=now)
        if config.defect == "silence":
            state.exhausted = True
        self.ops[op.operation_id] = state
        self.by_frame[op.frame_id] = op.operation_id

    async def advance(self, state: OpState) -> None:
        """Send what is due for one operation: at most one slice of events, or its end."""
        config, plan = self.config, state.plan
        delay = 0.0 if config.defect == "flood" else config.delta_delay_s
        for _ in range(SLICE_EVENTS):
            now = time.monotonic()
            if state.deadline is not None and now >= state.deadline:
                if config.variant == "timeout-cancelled":
                    await self.drop_cancelled(state, "timeout")
                    return
                if config.variant == "timeout-drop":
                    await self.drop_deadline(state)
                    return
                timeout = error_plan(
                    "timeout",
                    f"nnrp.timeout_ms {plan.timeout_ms} expired after {state.sent} events",
                    config.defect,
                )
                await self.push(state, timeout.terminal, timeout.status)
                return
            if now < state.next_due:
                return
            limit = plan.cancel_after_events
            if limit is not None and state.sent >= limit and config.defect != "ignores-cancel-hint":
                event = cancelled_event("cancel_after_events", events_sent=state.sent)
                await self.push(state, event, chat_profile.STATUS_OK)
                return
            item = next(state.events, StopIteration)
            if item is StopIteration:
                if plan.empty_terminal:
                    await self.push_empty(state)
                elif config.variant == "nnrp-submit-errors" and plan.extra.get("invalid_submit"):
                    await self.drop_invalid_submit(state)
                elif plan.terminal is None:
                    state.exhausted = True
                else:
                    neighbours.swap_terminal(self, state)
                    await self.push(state, plan.terminal, plan.status)
                return
            state.next_due = max(state.next_due + delay, now) if delay else now
            if item is not None:
                try:
                    for body in neighbours.cross_talk(self, state, item):
                        await self.send_partial(state, body)
                except NativeRuntimeError:
                    # The runtime has processed the client's cancel before this loop polled it.
                    await self.drop_cancelled(state, "client")
                    return

    def ignores_cancel(self, state: OpState) -> bool:
        """The defects that never look for a cancel while this operation streams."""
        defect = self.config.defect
        return defect == "late-event-after-cancel" or (
            defect == "responses-ignores-cancel" and state.plan.operation == OP_RESPONSES)

    async def run_inline(self, state: OpState) -> None:
        """late-event-after-cancel: stream the whole operation without polling once."""
        while state.streaming:
            await self.advance(state)
            await anyio.sleep(self.config.delta_delay_s)

    # --- events --------------------------------------------------------------------------

    async def on_cancel(self, op_id: int) -> None:
        state = self.ops.get(op_id)
        if state is None or state.finished or self.config.defect == "silence" \
                or admission.leaks_cancelled(self, state):
            return
        await self.drop_cancelled(state, "client")
        await neighbours.end_neighbours(self, state)

    async def handle(self, event: Any) -> bool:
        """Handle one polled event; True when the session is over."""
        if event.kind is NativeServerEventKind.SUBMIT:
            self.start(event.as_submit())
        elif event.kind is NativeServerEventKind.RUNTIME:
            frame = event.as_runtime()
            kind = frame.header.message_type
            if kind is MessageType.FRAME_CANCEL:
                await self.on_cancel(self.by_frame.get(frame.header.frame_id, -1))
            elif kind is MessageType.CANCEL:
                await self.on_cancel(frame.metadata.value.operation_id)
            elif kind is MessageType.SESSION_CLOSE:
                return True
        else:
            lifecycle = event.as_lifecycle()
            if lifecycle.state is OperationState.CANCELLED:
                await self.on_cancel(lifecycle.operation_id)
        return False

    async def run(self) -> None:
        failures = 0
        try:
            while not self.stop.is_set():
                self.ops = {k: s for k, s in self.ops.items() if not s.finished}
                busy = [s for s in self.ops.values() if s.streaming]
                deaf = [s for s in busy if self.ignores_cancel(s)]
                if deaf:
                    for state in deaf:
                        await self.run_inline(state)
                    continue
                try:
                    wait = BUSY_POLL_S if busy else IDLE_POLL_S
                    event = await self.ssess.next_event(timeout=wait)
                    failures = 0
                except NativeWouldBlockError:
                    event, failures = None, 0
                except NativeRuntimeError as exc:
                    # Stale events of a cancelled operation fail one by one; a dead peer
                    # fails every poll at once and forever, with no other signal.
                    failures += 1
                    if failures >= DEAD_PEER_POLLS:
                        log(f"session peer is gone ({exc}); ending the session")
                        self.release()
                        return
                    event = None
                if event is not None and await self.handle(event):
                    await self.close_open_ops("disconnect")
                    self.ssess.close()
                    return
                for state in busy:
                    if state.streaming:
                        await self.advance(state)
                if admission.drops_session(self):
                    self.release()
                    return
            await self.close_open_ops("shutdown")
            self.ssess.close()
        except Exception as exc:  # one broken session must not take the endpoint down
            log(f"session ended by {type(exc).__name__}: {exc}")
            self.release()

    def release(self) -> None:
        """Free the runtime's session after its peer vanished (nothing to acknowledge)."""
        with contextlib.suppress(NativeRuntimeError):
            self.ssess.close()

    async def close_open_ops(self, reason: str) -> None:
        for state in self.ops.values():
            if not state.finished and self.config.defect != "silence":
                await self.drop_cancelled(state, reason)


def _operation(payload: bytes) -> Any:
    try:
        envelope = json.loads(payload)
    except ValueError:
        return None
    return envelope.get("operation") if isinstance(envelope, dict) else None


@dataclass(frozen=True)
class Listen:
    """Where to listen: nnrp-py's route key, its provider locator and the application endpoint."""

    transport: str  # "tcp" | "ipc" | "websocket"
    provider: str  # tcp://HOST:PORT, unix:///PATH, ws://HOST:PORT
    host: str
    port: int
    policy: TransportPolicy

    def announced(self, bound: str) -> str:
        """The bound locator as a client target: HOST:PORT for TCP, else the URI itself."""
        return bound.removeprefix("tcp://") if self.transport == "tcp" else bound


_TRANSPORTS = {
    "tcp": ("tcp", TransportPolicy.FORCE_TCP),
    "ipc": ("ipc", TransportPolicy.FORCE_IPC),
    "unix": ("ipc", TransportPolicy.FORCE_IPC),
    "ws": ("websocket", TransportPolicy.FORCE_WEBSOCKET),
}


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` or ``tcp://HOST:PORT``, ``ipc:///PATH`` (``unix:///PATH``), ``ws://HOST:PORT``."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme not in _TRANSPORTS:
        raise argparse.ArgumentTypeError(
            f"--listen: unknown scheme {scheme!r} in {text!r} (use tcp, ipc/unix or ws)")
    transport, policy = _TRANSPORTS[scheme]
    if transport == "ipc":
        if not rest.startswith("/"):
            raise argparse.ArgumentTypeError(f"--listen wants ipc:///ABSOLUTE/PATH, got {text!r}")
        return Listen("ipc", f"unix://{rest}", "127.0.0.1", 0, policy)
    host, colon, port = rest.rstrip("/").rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {text!r}")
    return Listen(transport, f"{scheme}://{host}:{port}", host, int(port), policy)


async def serve(listen: Listen, config: Config) -> None:
    loop = asyncio.get_running_loop()
    # Every SDK call runs on the default executor; sessions must not queue behind accept.
    loop.set_default_executor(ThreadPoolExecutor(max_workers=32, thread_name_prefix="nnrp"))
    # A forced policy with one explicit route: the only way nnrp-py binds port 0, and its AUTO
    # policy fails without routes for every transport.
    options = NativeServerBootstrapOptions(
        endpoint=f"nnrp://{listen.host}:{listen.port or 4433}",
        provider_routes={listen.transport: NativeServerProviderRoute(
            provider_endpoint=listen.provider)},
        transport_policy=listen.policy,
    )
    stop = anyio.Event()
    with listen_native_server(options) as server:
        bound = server.bound_provider_endpoints[listen.transport].uri
        async with anyio.create_task_group() as tg:

            async def watch_signals(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    task_status.started()
                    async for _ in signals:
                        stop.set()
                        return

            # Announce readiness only once a stop signal is sure to end the endpoint cleanly.
            await tg.start(watch_signals)
            print(f"LISTENING {listen.announced(bound)}", flush=True)
            acceptor = Acceptor(server)  # nnrp-py's own accept can lose a session
            while not stop.is_set():
                try:
                    ssess = await anyio.to_thread.run_sync(acceptor.accept, ACCEPT_SLICE_MS)
                except NativeRuntimeError as exc:
                    log(f"accept failed: {exc}")
                    continue
                if ssess is None:
                    continue
                set_tcp_nodelay()
                tg.start_soon(Session(ssess, config, stop).run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=parse_listen, default=parse_listen("127.0.0.1:0"),
                        help="HOST:PORT (TCP; default 127.0.0.1:0, an ephemeral port), "
                             "ipc:///PATH or ws://HOST:PORT")
    parser.add_argument("--model", default="minimal-model", help="the one model id served")
    parser.add_argument("--levels", type=int, choices=(1, 2, 3), default=1,
                        help="serve the operations of Levels 1..N (default 1: chat; 3 is the "
                             "claim of manifest-levels.json)")
    parser.add_argument("--defect", default=None, help="inject one defect (see --list-defects)")
    parser.add_argument("--delta-delay-ms", type=float, default=1.0,
                        help="simulated generation time per token (default 1.0)")
    parser.add_argument("--variant", default=None,
                        help="a conformant variant: " + "; ".join(
                            f"{k}: {v}" for k, v in VARIANTS.items()))
    parser.add_argument("--list-defects", action="store_true", help="list defects and exit")
    args = parser.parse_args(argv)
    if args.list_defects:
        width = max(map(len, DEFECTS))
        for name, description in DEFECTS.items():
            print(f"{name:<{width}}  {description}")
        return 0
    try:
        defect = check_defect(args.defect)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        variant = check_variant(args.variant)
    except ValueError as exc:
        parser.error(str(exc))
    if args.delta_delay_ms < 0:
        parser.error("--delta-delay-ms must be >= 0")
    config = Config(model=args.model, defect=defect, delta_delay_s=args.delta_delay_ms / 1000,
                    variant=variant, levels=args.levels)
    try:
        anyio.run(serve, args.listen, config)
    except KeyboardInterrupt:
        pass
    except (NativeRuntimeError, RuntimeError) as exc:  # a selection error is a RuntimeError
        print(f"error: cannot listen on {args.listen.provider}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
