"""The soak benchmark: 10,000 operations through the real adapter handler and NNRP server
binding over loopback TCP, with the server's resident memory sampled over time.

It owns a deterministic synthetic backend (vLLM-shaped chunks, no engine: the soak measures
the adapter and the wire, not generation), the operation mix (streaming text, tool calls,
non-streaming, malformed, cancelled), the exact per-operation event check (lost, duplicated
and misordered events), RSS sampling, and the verdict "RSS flat within ±10 % after warm-up".

The server (adapter, binding, backend) runs in this process and is what the RSS figures are
about; the client sessions run in a child process (``--drive``) over 127.0.0.1, so client
bookkeeping is not counted as server memory (``--in-process`` puts both in one process, as
the first version of this benchmark did). The warm-up point is the first sample at or past
``--warmup`` operations; the baseline is the RSS of that sample and the deviation is the
largest ``|rss - baseline| / baseline`` of every later sample, up to the last one (taken
after the client closed its sessions).

To say where any growth is, every sample also carries Python's allocated block count and
glibc malloc's bytes in use and held free (native code included), and the Python object
counts by type are compared between the warm-up point and the "late" point (the first
sample at 90 % of the operations, sessions still open); ``--tracemalloc`` adds the Python
allocation sites that grew, ``--reconnect-every N`` replaces each client session after N
operations (session-scoped growth then shows as flat).

``vllm-nnrp bench soak --out reports/soak.json`` (or ``python -m
vllm_nnrp_adapter.benchmark.soak``); exit 0 only when RSS is flat, no event was lost,
duplicated or misordered, every terminal was the expected one and nothing stayed open.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from nnrp_conformance import contract

from .proc_cpu import rss_bytes

__all__ = ["SyntheticBackend", "main"]

MODEL = "soak-model"
TOKENS = 8
OP_TIMEOUT_S = 30.0


@dataclass
class _Chunk:
    data: dict[str, Any]


class SyntheticBackend:
    """vLLM's chunk shape for a fixed answer; counts unfinished requests like the engine."""

    version = "synthetic"

    def __init__(self, tokens: int = TOKENS) -> None:
        self.served_model_names = [MODEL]
        self.tokens = tokens
        self.unfinished: set[str] = set()

    async def num_unfinished_requests(self) -> int:
        return len(self.unfinished)

    async def abort(self, request_id: str) -> bool:
        known = request_id in self.unfinished
        self.unfinished.discard(request_id)
        return known

    async def chat(self, body: dict[str, Any], *, request_id: str) -> Any:
        self.unfinished.add(request_id)
        if not body.get("stream"):
            self.unfinished.discard(request_id)
            return {
                "id": f"chatcmpl-{request_id}",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": _text(self.tokens)},
                        "finish_reason": "length",
                    }
                ],
                "usage": {
                    "prompt_tokens": 4,
                    "completion_tokens": self.tokens,
                    "total_tokens": 4 + self.tokens,
                },
            }
        return self._stream(request_id, bool(body.get("tools")))

    async def _stream(self, request_id: str, tools: bool) -> AsyncIterator[_Chunk]:
        base = {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
        }
        try:
            for i in range(self.tokens):
                await anyio.sleep(0)
                delta: dict[str, Any] = {"content": f"t{i} "}
                if tools:
                    delta = (
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call-0",
                                    "type": "function",
                                    "function": {"name": "fn", "arguments": ""},
                                }
                            ]
                        }
                        if i == 0
                        else {
                            "tool_calls": [
                                {"index": 0, "function": {"arguments": f'{{"a{i}":{i}}}'}}
                            ]
                        }
                    )
                yield _Chunk(
                    {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                )
            yield _Chunk(
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {},
                            "finish_reason": "tool_calls" if tools else "length",
                        }
                    ],
                }
            )
            yield _Chunk(
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 4,
                        "completion_tokens": self.tokens,
                        "total_tokens": 4 + self.tokens,
                    },
                }
            )
        finally:
            self.unfinished.discard(request_id)


def _text(tokens: int) -> str:
    return "".join(f"t{i} " for i in range(tokens))


def _rss() -> int:
    return rss_bytes(os.getpid()) or 0


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        return libc
    except (OSError, AttributeError):
        return None  # not glibc ≥ 2.33: the malloc figures are left out


_LIBC = _libc()


def _malloc() -> tuple[int, int] | None:
    """glibc malloc over all arenas (native code too): bytes handed out and not had back,
    and bytes it holds free (what ``malloc_trim`` can return)."""
    if _LIBC is None:
        return None
    info = _LIBC.mallinfo2()
    return int(info.uordblks + info.hblkhd), int(info.fordblks)


def _mib(n: float) -> float:
    return round(n / 2**20, 2)


# --- the operation mix and its exact expectations ---------------------------------------------
#: i % 10 -> kind; 6 is a streaming text operation the client cancels right after submitting
KINDS = {7: "non_streaming", 8: "tools", 9: "malformed", 6: "cancelled"}


def _kind(i: int) -> str:
    return KINDS.get(i % 10, "text")


def _envelope(i: int) -> dict[str, Any] | bytes:
    kind = _kind(i)
    if kind == "malformed":
        return b'{"schema_version": "openai-compatible/1", "operation": '
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"q{i}"}],
        "stream": kind != "non_streaming",
    }
    if kind == "tools":
        body["tools"] = [{"type": "function", "function": {"name": "fn", "parameters": {}}}]
    return {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": body,
    }


def _expected(kind: str, tokens: int) -> list[tuple[str, str]]:
    """The partial events (type, payload key) an operation of ``kind`` must carry, in order."""
    if kind in ("non_streaming", "malformed"):
        return []
    usage = (contract.EV_USAGE, "")
    if kind == "tools":
        args = [f'{{"a{i}":{i}}}' for i in range(1, tokens)]
        return [
            (contract.EV_TOOL_CALL_STARTED, "call-0"),
            *((contract.EV_TOOL_CALL_DELTA, a) for a in args),
            (contract.EV_TOOL_CALL_COMPLETED, "call-0"),
            usage,
        ]
    return [(contract.EV_OUTPUT_TEXT_DELTA, f"t{i} ") for i in range(tokens)] + [usage]


def _key(ev: dict[str, Any] | None) -> tuple[str, str]:
    if not isinstance(ev, dict):
        return "<undecodable>", ""
    t = ev.get("type", "")
    if t == contract.EV_OUTPUT_TEXT_DELTA:
        return t, str(ev.get("delta"))
    if t == contract.EV_TOOL_CALL_DELTA:
        return t, str(ev.get("arguments_delta"))
    if t in (contract.EV_TOOL_CALL_STARTED, contract.EV_TOOL_CALL_COMPLETED):
        return t, str(ev.get("call_id"))
    return t, ""


def _classify(got: list[tuple[str, str]], want: list[tuple[str, str]], seqs: list[int]) -> str:
    """'' when ``got`` is exactly ``want`` with contiguous result sequences, else the defect."""
    if len(set(seqs)) != len(seqs):
        return "duplicated"
    if seqs != sorted(seqs):
        return "misordered"
    if got == want and seqs == list(range(1, len(seqs) + 1)):
        return ""
    have, need = Counter(got), Counter(want)
    if any(have[k] > need[k] for k in have):
        return "duplicated"
    if have == need:
        return "misordered" if got != want else "lost"  # same events, a gap in the sequence
    return "lost"


class _Checker:
    """Judges every operation against its kind's exact expectation."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.counts = Counter({"lost": 0, "duplicated": 0, "misordered": 0})
        self.outcomes: Counter[str] = Counter()
        self.bad_terminals = 0
        self.wire_findings: Counter[str] = Counter()
        self.events = 0
        self.cancel_races = 0
        self.examples: list[str] = []

    def _problem(self, i: int, what: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(f"op {i} ({_kind(i)}): {what}")

    def judge(self, i: int, op: Any, term: Any) -> None:
        kind = _kind(i)
        got = [_key(e) for e in op.events]
        seqs = [r.metadata.get("result_sequence") for r in op.received if r.kind == "partial"]
        want = _expected(kind, self.tokens)
        outcome = str(term.outcome)
        self.outcomes[f"{kind}:{outcome}"] += 1
        self.events += len(got) + 1
        event = term.event if isinstance(term.event, dict) else {}
        findings = [f["rule"] for f in op.wire_findings]
        if kind == "cancelled":
            # Cancelled right after the submit: any prefix of the text, then a cancelled
            # terminal, or the whole text when the operation finished before the cancel
            # landed. The known race (reports/reliability.md): the server pushed its result
            # before it polled the cancel; the client SDK has already cancelled locally, so it
            # discards the partials and surfaces only the push (wire.result_after_cancel).
            raced = outcome == contract.TERMINAL_SUCCESS and "wire.result_after_cancel" in findings
            if raced:
                self.cancel_races += 1
                findings.remove("wire.result_after_cancel")
            ok = (
                outcome == contract.TERMINAL_CANCELLED
                or raced
                or (outcome == contract.TERMINAL_SUCCESS and got == want)
            )
            if outcome == contract.TERMINAL_CANCELLED or raced:
                want = want[: len(got)]
        elif kind == "malformed":
            ok = (
                event.get("type") == contract.EV_ERROR
                and (event.get("error") or {}).get("code") == contract.ERR_INVALID_REQUEST
            )
        elif kind == "non_streaming":
            body = event.get("body") or {}
            content = ((body.get("choices") or [{}])[0].get("message") or {}).get("content")
            ok = event.get("type") == contract.EV_COMPLETED and content == _text(self.tokens)
        else:
            ok = event.get("type") == contract.EV_COMPLETED
        if not ok:
            self.bad_terminals += 1
            self._problem(i, f"terminal {term.delivery} {outcome} {str(term.event)[:120]}")
            if term.delivery in ("timeout", "transport_error"):
                self.counts["lost"] += 1  # the terminal itself never arrived
        defect = _classify(got, want, seqs)
        if defect:
            self.counts[defect] += 1
            self._problem(i, f"{defect}: got {got[:6]}… seq {seqs[:10]}")
        for rule in findings:
            self.wire_findings[rule] += 1
            self._problem(i, f"wire finding {rule}")


async def _drive(
    address: str, ops: int, sessions: int, tokens: int, reconnect_every: int = 0
) -> dict[str, Any]:
    """The client side: ``sessions`` connections share ``ops`` operations, each checked;
    with ``reconnect_every`` each connection is replaced after that many operations."""
    from nnrp_conformance.client import NnrpClient

    check = _Checker(tokens)
    rss_start = _rss()
    done = 0
    finished = 0
    all_done = anyio.Event()
    live: dict[str, Any] = {}
    t0 = time.perf_counter()
    wall = 0.0

    async def worker(n: int) -> None:
        nonlocal done
        mine = list(range(n, ops, sessions))
        per = reconnect_every or max(1, len(mine))
        chunks = [mine[k : k + per] for k in range(0, len(mine), per)] or [[]]
        for c, chunk in enumerate(chunks):
            async with await NnrpClient.connect(address) as client:
                for i in chunk:
                    op = await client.submit(_envelope(i), timeout=OP_TIMEOUT_S)
                    if _kind(i) == "cancelled":
                        await op.cancel()
                    term = await op.result()
                    check.judge(i, op, term)
                    done += 1
                if c == len(chunks) - 1:
                    await last(client)

    async def last(client: Any) -> None:
        # Every session stays open until all are done, so what the clients still hold is
        # counted before closing them frees it (``client`` is held open by the caller).
        nonlocal finished, wall
        finished += 1
        if finished == sessions:
            wall = time.perf_counter() - t0
            live["rss_mib"] = _mib(_rss())
            live["objects_top"] = dict(_census().most_common(6))
            all_done.set()
        await all_done.wait()

    async with anyio.create_task_group() as tg:
        for n in range(sessions):
            tg.start_soon(worker, n)
    return {
        "operations": done,
        "wall_s": round(wall, 3),
        "ops_per_s": round(done / wall, 1) if wall else 0.0,
        "events": check.events,
        "lost": check.counts["lost"],
        "duplicated": check.counts["duplicated"],
        "misordered": check.counts["misordered"],
        "bad_terminals": check.bad_terminals,
        "wire_findings": dict(check.wire_findings),
        "cancel_races": check.cancel_races,
        "outcomes": dict(sorted(check.outcomes.items())),
        "problems": check.examples,
        "client_rss_start_mib": _mib(rss_start),
        "client_rss_end_mib": live.get("rss_mib", _mib(_rss())),
        "client_objects_top": live.get("objects_top", {}),
    }


# --- the server side: sampling and the verdict --------------------------------------------------
def _census() -> Counter[str]:
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects())


def _manifest() -> dict[str, Any]:
    here = Path(__file__).resolve()
    for path in (
        here.parents[3] / "manifests" / "vllm-nnrp-adapter.json",
        here.parents[1] / "manifest.json",
    ):
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError("the adapter manifest (manifests/vllm-nnrp-adapter.json)")


async def _soak(args: argparse.Namespace) -> dict[str, Any]:
    from vllm_nnrp_adapter.adapter import VllmNnrpAdapter
    from vllm_nnrp_adapter.nnrp_server import NnrpServer
    from vllm_nnrp_adapter.observability import Recorder

    tracing = None
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(6)
        tracing = tracemalloc
    backend = SyntheticBackend(args.tokens)
    recorder = Recorder()
    adapter = VllmNnrpAdapter(backend, _manifest(), recorder=recorder)
    samples: list[dict[str, Any]] = []
    marks: dict[str, Any] = {}
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    async with NnrpServer(adapter.handle, "127.0.0.1:0") as server:

        def sample() -> dict[str, Any]:
            s = {
                "t_s": round(time.perf_counter() - t0, 2),
                "operations": server.stats["operations"],
                "rss_mib": _mib(_rss()),
                "py_blocks": sys.getallocatedblocks(),
            }
            malloc = _malloc()
            if malloc is not None:
                s["malloc_in_use_mib"], s["malloc_free_held_mib"] = map(_mib, malloc)
            samples.append(s)
            return s

        async def sampler() -> None:
            while True:
                s = sample()
                if "warmup" not in marks and s["operations"] >= args.warmup:
                    marks["warmup"] = len(samples) - 1
                    marks["census"] = _census()
                    if tracing is not None:
                        marks["trace"] = tracing.take_snapshot()
                elif "late" not in marks and s["operations"] >= args.ops * 0.9:
                    # the sessions are still open here (what they hold is freed at close)
                    marks["late"] = len(samples) - 1
                    marks["census_late"] = _census()
                    if tracing is not None and "trace" in marks:
                        diff = tracing.take_snapshot().compare_to(marks["trace"], "lineno")
                        marks["trace_top"] = [str(d) for d in diff[:10]]
                await anyio.sleep(args.sample_interval)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler)
            if args.in_process:
                client = await _drive(
                    server.address, args.ops, args.sessions, args.tokens, args.reconnect_every
                )
            else:
                client = await _drive_child(server.address, args)
            # bounded: whatever is still open after this is reported, not waited for
            with anyio.move_on_after(10):
                while (
                    backend.unfinished
                    or server._tasks
                    or any(s.ops for s in server.sessions.values())
                ):
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        open_ops = sum(len(s.ops) for s in server.sessions.values())
        open_tasks = len(server._tasks)
        unfinished = len(backend.unfinished)
        in_flight = recorder.snapshot()["in_flight"]
        census_end = _census()
        final = sample()
        trimmed = None
        if _LIBC is not None:
            _LIBC.malloc_trim(0)  # what the allocator keeps but no longer uses goes back
            trimmed = _mib(_rss())
        trace_top: list[str] = marks.get("trace_top", [])
        if tracing is not None:
            tracing.stop()
        server_ops = server.stats["operations"]
    load_end = os.getloadavg()
    return _verdict(
        args,
        client,
        samples,
        marks,
        final,
        census_end,
        trace_top,
        {
            "server_operations": server_ops,
            "open_operations": open_ops,
            "open_handler_tasks": open_tasks,
            "unfinished_backend_requests": unfinished,
            "recorder_in_flight": in_flight,
            "rss_after_malloc_trim_mib": trimmed,
            "load_average_start": [round(x, 2) for x in load_start],
            "load_average_end": [round(x, 2) for x in load_end],
        },
    )


async def _drive_child(address: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "vllm_nnrp_adapter.benchmark.soak",
        "--drive",
        address,
        "--ops",
        str(args.ops),
        "--sessions",
        str(args.sessions),
        "--tokens",
        str(args.tokens),
        "--reconnect-every",
        str(args.reconnect_every),
    ]
    # bounded: 30 s per operation is the client's own limit; the whole run gets a generous cap
    limit = 120 + args.ops * 0.1
    with anyio.fail_after(limit):
        done = await anyio.run_process(cmd, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"soak driver exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def _commit() -> str | None:
    """The checkout's commit (``+dirty`` with local changes), when this runs from one."""
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "suite", "reference_adapter"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def _slope_kib_per_kop(points: list[dict[str, Any]]) -> float:
    """Least-squares RSS growth per 1,000 operations over ``points``."""
    xs = [p["operations"] for p in points]
    ys = [p["rss_mib"] * 1024 for p in points]
    if len(points) < 2 or max(xs) == min(xs):
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return round(num / den * 1000, 1)


def _verdict(
    args: argparse.Namespace,
    client: dict[str, Any],
    samples: list[dict[str, Any]],
    marks: dict[str, Any],
    final: dict[str, Any],
    census_end: Counter[str],
    trace_top: list[str],
    server: dict[str, Any],
) -> dict[str, Any]:
    w = marks.get("warmup")
    if w is None:
        raise RuntimeError(f"no sample reached the warm-up ({args.warmup} operations)")
    base = samples[w]
    after = samples[w:]
    dev = max(abs(s["rss_mib"] - base["rss_mib"]) for s in after) / base["rss_mib"] * 100
    late = samples[marks.get("late", len(samples) - 1)]
    growth = marks.get("census_late", census_end) - marks["census"]

    def grew(key: str, at: dict[str, Any]) -> float | None:
        return round(at[key] - base[key], 2) if key in base else None

    clean = (
        client["lost"] == client["duplicated"] == client["misordered"] == 0
        and client["bad_terminals"] == 0
        and not client["wire_findings"]
        and client["operations"] == args.ops
        and not any(
            server[k]
            for k in (
                "open_operations",
                "open_handler_tasks",
                "unfinished_backend_requests",
                "recorder_in_flight",
            )
        )
    )
    from .common import machine_info, now_rfc3339, versions_info

    return {
        "name": "soak",
        "generated_at": now_rfc3339(),
        "commit": _commit(),
        "parameters": {
            "operations": args.ops,
            "sessions": args.sessions,
            "reconnect_every": args.reconnect_every,
            "tokens_per_stream": args.tokens,
            "warmup_operations": args.warmup,
            "sample_interval_s": args.sample_interval,
            "client": "same process" if args.in_process else "child process",
            "mix": "per 10 ops: 6 streaming text, 1 cancelled stream, 1 non-streaming, "
            "1 tool call stream, 1 malformed submit",
        },
        "machine": {**machine_info(), "nproc": os.cpu_count()},
        "versions": versions_info(),
        "load_average_start": server["load_average_start"],
        "load_average_end": server["load_average_end"],
        "operations": client["operations"],
        "wall_s": client["wall_s"],
        "ops_per_s": client["ops_per_s"],
        "events": client["events"],
        "lost": client["lost"],
        "duplicated": client["duplicated"],
        "misordered": client["misordered"],
        "bad_terminals": client["bad_terminals"],
        "wire_findings": client["wire_findings"],
        "cancel_races_result_after_cancel": client["cancel_races"],
        "outcomes": client["outcomes"],
        "problems": client["problems"],
        "warmup": {"operations": base["operations"], "t_s": base["t_s"]},
        "rss_baseline_mib": base["rss_mib"],
        "rss_min_after_warmup_mib": min(s["rss_mib"] for s in after),
        "rss_max_after_warmup_mib": max(s["rss_mib"] for s in after),
        "rss_final_mib": final["rss_mib"],
        "rss_max_deviation_percent": round(dev, 2),
        "rss_slope_kib_per_1000_ops": _slope_kib_per_kop(after),
        # "late" = the first sample at 90 % of the operations, sessions still open;
        # "closed" = the last sample, after the client closed its sessions
        "late_sample": {"operations": late["operations"], "t_s": late["t_s"]},
        "py_blocks_growth_late": grew("py_blocks", late),
        "malloc_in_use_growth_late_mib": grew("malloc_in_use_mib", late),
        "malloc_in_use_growth_closed_mib": grew("malloc_in_use_mib", final),
        "malloc_free_held_growth_closed_mib": grew("malloc_free_held_mib", final),
        "rss_after_malloc_trim_mib": server["rss_after_malloc_trim_mib"],
        "object_growth_late": dict(growth.most_common(10)),
        "tracemalloc_growth_late": trace_top,
        "client_rss_start_mib": client["client_rss_start_mib"],
        "client_rss_end_mib": client["client_rss_end_mib"],
        "client_objects_top": client["client_objects_top"],
        **{
            k: server[k]
            for k in (
                "server_operations",
                "open_operations",
                "open_handler_tasks",
                "unfinished_backend_requests",
                "recorder_in_flight",
            )
        },
        "flat_within_10_percent": dev <= 10.0,
        "clean": clean,
        "samples": samples,
    }


def _print(doc: dict[str, Any], console: Console) -> None:
    p = doc["parameters"]
    table = Table(
        title=f"soak: {doc['operations']} operations, {p['sessions']} sessions, client in "
        f"{p['client']}, load {doc['load_average_start'][0]}→{doc['load_average_end'][0]}",
        title_justify="left",
    )
    table.add_column("figure", no_wrap=True)
    table.add_column("value", justify="right")
    w = doc["warmup"]
    rows = [
        ("wall", f"{doc['wall_s']:.1f} s"),
        ("throughput", f"{doc['ops_per_s']:.1f} ops/s"),
        ("events checked", f"{doc['events']:,}"),
        (
            "lost / duplicated / misordered",
            f"{doc['lost']} / {doc['duplicated']} / {doc['misordered']}",
        ),
        ("wrong terminals", str(doc["bad_terminals"])),
        ("wire findings (other)", str(sum(doc["wire_findings"].values()))),
        ("cancel races (push after cancel)", str(doc["cancel_races_result_after_cancel"])),
        ("warm-up point", f"{w['operations']} ops at {w['t_s']} s"),
        ("server RSS baseline", f"{doc['rss_baseline_mib']:.1f} MiB"),
        (
            "server RSS min / max after",
            f"{doc['rss_min_after_warmup_mib']:.1f} / {doc['rss_max_after_warmup_mib']:.1f} MiB",
        ),
        ("server RSS max deviation", f"{doc['rss_max_deviation_percent']:.2f} %"),
        ("server RSS slope", f"{doc['rss_slope_kib_per_1000_ops']} KiB / 1,000 ops"),
        (
            f"growth by {doc['late_sample']['operations']} ops: Python blocks",
            f"{doc['py_blocks_growth_late']:,}",
        ),
        (
            f"growth by {doc['late_sample']['operations']} ops: malloc in use",
            f"{doc['malloc_in_use_growth_late_mib']} MiB",
        ),
        (
            "malloc in use / free-held growth, sessions closed",
            f"{doc['malloc_in_use_growth_closed_mib']} / "
            f"{doc['malloc_free_held_growth_closed_mib']} MiB",
        ),
        ("RSS after malloc_trim at end", f"{doc['rss_after_malloc_trim_mib']} MiB"),
        (
            "client RSS start → end",
            f"{doc['client_rss_start_mib']:.1f} → {doc['client_rss_end_mib']:.1f} MiB",
        ),
        (
            "left open (ops/tasks/backend)",
            f"{doc['open_operations']} / "
            f"{doc['open_handler_tasks']} / {doc['unfinished_backend_requests']}",
        ),
        ("flat within ±10 %", str(doc["flat_within_10_percent"])),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    series = Table(title="server RSS over time", title_justify="left")
    for col in ("t (s)", "operations", "RSS (MiB)", "vs baseline"):
        series.add_column(col, justify="right")
    samples = doc["samples"]
    step = max(1, len(samples) // 16)
    shown = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    for s in shown:
        rel = (s["rss_mib"] / doc["rss_baseline_mib"] - 1) * 100
        series.add_row(str(s["t_s"]), str(s["operations"]), f"{s['rss_mib']:.1f}", f"{rel:+.1f} %")
    console.print(series)
    if doc["object_growth_late"]:
        console.print(
            f"object count growth warm-up → late (top): {doc['object_growth_late']}", markup=False
        )
    for line in doc["tracemalloc_growth_late"]:
        console.print(f"  {line}", markup=False)
    for line in doc["problems"]:
        console.print(f"  problem: {line}", markup=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vllm-nnrp bench soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="chunks per synthetic stream")
    parser.add_argument(
        "--reconnect-every",
        type=int,
        default=0,
        metavar="N",
        help="replace each client session after N operations (0: one session each throughout)",
    )
    parser.add_argument("--warmup", type=int, default=1_000, help="operations before RSS is judged")
    parser.add_argument(
        "--sample-interval", type=float, default=0.25, help="seconds between RSS samples"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the client sessions in this process too (RSS then counts both)",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also record the Python allocation sites that grew (slow)",
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--drive", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 256 or args.tokens < 2 or args.reconnect_every < 0:
        parser.error("--sessions must be 1..256, --tokens at least 2, --reconnect-every ≥ 0")
    if args.drive:
        host = args.drive.rsplit(":", 1)[0]
        if host not in ("127.0.0.1", "localhost", "[::1]"):
            parser.error("the soak driver only talks to loopback")
        doc = anyio.run(
            _drive,
            args.drive,
            args.ops,
            args.sessions,
            args.tokens,
            args.reconnect_every,
            backend="asyncio",
        )
        print(json.dumps(doc))
        return 0
    if args.ops <= args.warmup:
        parser.error("--ops must exceed --warmup")
    doc = anyio.run(_soak, args, backend="asyncio")
    _print(doc, Console(highlight=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if doc["flat_within_10_percent"] and doc["clean"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
