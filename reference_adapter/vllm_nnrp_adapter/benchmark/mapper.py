"""``vllm-nnrp bench mapper``: the adapter's chunk → event → wire-bytes path, against its floor.

One *mapping* is what the adapter does per streamed vLLM chunk, with the real code: split
the SSE text (``vllm_backend.parse_sse``), ``json.loads`` the payload,
``ChunkMapper.map_chunk`` it, and encode each event as the server does
(``nnrp_conformance.wire.codec.encode_event``). The *floor*, measured in the same run and
interleaved with it, is one ``json.loads`` of the same chunk text plus one compact
``json.dumps`` of the chunk: parse + serialise and nothing else. Single-threaded, so the
rate is per core; it is taken on this thread's CPU clock, so time the scheduler gives to
other processes on a busy machine is not counted. Targets: ≥ 200,000 mappings/s per core
and ≤ 2× the floor's cost.

Input: the streamed content chunks recorded from real vLLM under
``tests/fixtures/vllm/<version>/stream_text.json`` (newest version), else a literal chunk of
the same shape. One mapper per stream of ``--stream-chunks`` chunks, as in the server.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from nnrp_conformance.wire import codec

from ..launch.embedded import REPO_ROOT
from ..profile.mapping import ChunkMapper
from ..profile.policy import TESTED_VERSIONS
from ..vllm_backend import parse_sse
from .lib.results import BENCH_MAPPER, metric, print_results, ratio, results_document, write_results

TARGET_RATE = 200_000.0
MAX_FLOOR_RATIO = 2.0
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "vllm"

#: a vLLM 0.2x streamed content chunk, as vLLM serialises it (pydantic compact JSON)
LITERAL_CHUNK: dict[str, Any] = {
    "id": "chatcmpl-0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f",
    "object": "chat.completion.chunk",
    "created": 1767225600,
    "model": "tiny-model",
    "choices": [
        {"index": 0, "delta": {"content": " word"}, "logprobs": None, "finish_reason": None}
    ],
}


def sse_line(chunk: dict[str, Any]) -> str:
    return "data: " + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False) + "\n\n"


def _newest_fixture(root: Path) -> Path | None:
    """The recording of the newest tested vLLM that has one (the release policy's order)."""
    for version in reversed(TESTED_VERSIONS):
        if (root / version / "stream_text.json").is_file():
            return root / version / "stream_text.json"
    return None


def load_chunks(path: Path | None) -> tuple[list[dict[str, Any]], str]:
    """Content chunks (non-empty ``delta.content``, no finish) and where they came from."""
    source = path or _newest_fixture(FIXTURES)
    if source is None:
        return [LITERAL_CHUNK], "literal chunk (no recorded fixtures found)"
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SystemExit(f"vllm-nnrp bench mapper: cannot read fixture {source}: {exc}") from None
    chunks = (
        [
            c
            for c in data
            if isinstance(c, dict)
            and any(
                (ch.get("delta") or {}).get("content") and not ch.get("finish_reason")
                for ch in c.get("choices") or ()
            )
        ]
        if isinstance(data, list)
        else []
    )
    if not chunks:
        raise SystemExit(f"vllm-nnrp bench mapper: {source}: no streamed content chunks")
    # recorded in the results: relative to the checkout when it lies in it (portable evidence)
    with contextlib.suppress(ValueError):
        return chunks, source.resolve().relative_to(REPO_ROOT).as_posix()
    return chunks, str(source)


def run_mapper(streams: Sequence[Sequence[str]]) -> tuple[int, int, int]:
    """(CPU ns, events, wire bytes) for mapping every SSE line of every stream."""
    parse, loads, encode = parse_sse, json.loads, codec.encode_event
    events = nbytes = 0
    start = time.thread_time_ns()
    for stream in streams:
        mapper = ChunkMapper()
        for line in stream:
            for payload in parse(line):
                for event in mapper.map_chunk(loads(payload)):
                    nbytes += len(encode(event))
                    events += 1
    return time.thread_time_ns() - start, events, nbytes


def run_floor(streams: Sequence[Sequence[str]], payloads: dict[str, str]) -> tuple[int, int]:
    """(CPU ns, bytes): json.loads of each chunk's JSON text + one compact json.dumps."""
    loads, dumps = json.loads, json.dumps
    nbytes = 0
    start = time.thread_time_ns()
    for stream in streams:
        for line in stream:
            nbytes += len(
                dumps(loads(payloads[line]), separators=(",", ":"), ensure_ascii=False).encode()
            )
    return time.thread_time_ns() - start, nbytes


def calibration_ns() -> float:
    """CPU ns of ``sum(range(1000))`` (best of 5): how fast this core is, to compare machines."""
    best = float("inf")
    for _ in range(5):
        start = time.thread_time_ns()
        for _ in range(200):
            sum(range(1000))
        best = min(best, (time.thread_time_ns() - start) / 200)
    return best


def _profile(streams: Sequence[Sequence[str]], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    run_mapper(streams)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vllm-nnrp bench mapper", description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=100_000, help="mappings per repeat")
    ap.add_argument("--repeats", type=int, default=7, help="repeats (medians; at least 5)")
    ap.add_argument("--stream-chunks", type=int, default=64, help="chunks per stream (mapper)")
    ap.add_argument(
        "--fixture",
        type=Path,
        default=None,
        help="a recorded stream_text.json (default: the newest under tests/fixtures/vllm/)",
    )
    ap.add_argument(
        "--json",
        type=Path,
        default=Path("mapper-benchmark.json"),
        help="where to write the benchmark-results JSON (default %(default)s)",
    )
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the mapper")
    ap.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed (default: report only)"
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.repeats < 5 or args.count < args.stream_chunks or args.stream_chunks < 1:
        ap.error("need --repeats >= 5 and --count >= --stream-chunks >= 1")
    console = Console(highlight=False)

    chunks, source = load_chunks(args.fixture)
    lines = [sse_line(c) for c in chunks]
    payloads = {line: parse_sse(line)[0] for line in lines}
    per_stream = args.stream_chunks
    n_streams = args.count // per_stream
    stream = [lines[i % len(lines)] for i in range(per_stream)]
    streams = [stream] * n_streams
    count = n_streams * per_stream

    run_mapper(streams[: max(1, n_streams // 10)])  # warm-up: caches, allocator
    run_floor(streams[: max(1, n_streams // 10)], payloads)
    mapper_ns: list[float] = []
    floor_ns: list[float] = []
    events = wire_bytes = 0
    for _ in range(args.repeats):
        elapsed, events, wire_bytes = run_mapper(streams)
        mapper_ns.append(elapsed / count)
        floor_ns.append(run_floor(streams, payloads)[0] / count)

    m_rate = metric(
        "mapper.mappings_per_s",
        "1/s",
        [1e9 / ns for ns in mapper_ns],
        description="SSE chunk → profile event(s) → wire bytes, per core",
    )
    f_rate = metric(
        "floor.mappings_per_s",
        "1/s",
        [1e9 / ns for ns in floor_ns],
        description="json.loads + compact json.dumps of the same chunk, per core",
    )
    m_ns = metric("mapper.ns_per_mapping", "ns", mapper_ns)
    f_ns = metric("floor.ns_per_mapping", "ns", floor_ns)
    cost_ratio = m_ns["median"] / f_ns["median"]
    doc = results_document(
        BENCH_MAPPER,
        [m_rate, f_rate, m_ns, f_ns],
        runs=args.repeats,
        parameters={
            "mappings_per_repeat": count,
            "chunks_per_stream": per_stream,
            "distinct_chunks": len(chunks),
            "events_per_mapping": round(events / count, 4),
            "wire_bytes_per_mapping": round(wire_bytes / count, 2),
            "input": source,
            "target_mappings_per_s": TARGET_RATE,
            "target_max_floor_ratio": MAX_FLOOR_RATIO,
            "calibration_sum_range_1000_ns": round(calibration_ns(), 1),
        },
        ratios=[
            ratio(
                "mapper_cost_over_floor",
                "mapper.ns_per_mapping",
                "floor.ns_per_mapping",
                cost_ratio,
                "median mapper cost / median floor cost (target ≤ 2)",
            )
        ],
        description=__doc__.split("\n")[0],
    )
    print_results(doc, console)
    rate = m_rate["median"]
    rate_ok, ratio_ok = rate >= TARGET_RATE, cost_ratio <= MAX_FLOOR_RATIO
    console.print(
        f"mapper {rate:,.0f} mappings/s per core "
        f"({'meets' if rate_ok else 'MISSES'} ≥ {TARGET_RATE:,.0f}); floor "
        f"{f_rate['median']:,.0f}/s; mapper/floor cost {cost_ratio:.2f}× "
        f"({'meets' if ratio_ok else 'MISSES'} ≤ {MAX_FLOOR_RATIO:g}×); input: {source}"
    )
    if args.profile:
        console.print(_profile(streams[: max(1, n_streams // 4)], 15), markup=False)
    path = write_results(doc, args.json)
    console.print(f"results written to {path}")
    return 1 if args.check and not (rate_ok and ratio_ok) else 0


if __name__ == "__main__":
    raise SystemExit(main())
