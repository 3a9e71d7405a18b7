"""Benchmarks of the adapter, one module per benchmark, each with ``main(argv) -> int``.

``vllm-nnrp bench NAME [ARGS]`` dispatches here. Every benchmark prints a table and writes
its JSON (``--json PATH``) in the ``benchmark-results`` schema; figures are medians of
repeats, with machine and versions recorded.

* ``wire``: the NNRP wire itself (naive nnrp-py pattern vs this project's binding),
  cross-process over loopback TCP.
* ``mapper``: profile mapper throughput (chunk → event → wire bytes) against its floor.
* ``cancel``: cancel latency with N fast streams sharing one session (server cross-process).
* ``soak``: a long operation soak on a scripted backend, resident memory over time.
* ``vllm``: streaming latency, cancellation latency and the end-to-end smoke on real vLLM.
* ``parity``: vLLM's own HTTP/SSE server against the adapter over NNRP, same engine,
  interleaved rounds, with CPU per 1,000 tokens of each serving process.
* ``idle``: the server binding's CPU while 1, 32 and 256 sessions sit idle.
* ``capacity``: the most concurrent streaming sessions the adapter serves without an error
  (real vLLM), with its CPU, threads and memory at each step.
* ``hotpath``: a py-spy profile of the serving process under load, CPU per token by category.
* ``adapter-ab``: this adapter against an earlier checkout of it, same engine, interleaved.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

BENCHMARKS: dict[str, str] = {
    "wire": "the NNRP wire: naive nnrp-py vs this binding",
    "mapper": "profile mapper throughput vs the parse+serialise floor",
    "cancel": "cancel latency with 1/4/16/32 streams sharing one session",
    "soak": "10,000-operation soak, resident memory flat after warm-up",
    "vllm": "streaming and cancellation latency, e2e smoke (real vLLM)",
    "parity": "HTTP/SSE (vllm serve) vs NNRP adapter on the same engine, interleaved",
    "hotpath": "py-spy profile of the serving process: CPU per token by category",
    "idle": "server binding CPU with 1/32/256 idle sessions",
    "capacity": "most concurrent streaming sessions served without an error (real vLLM)",
    "adapter-ab": "this adapter vs an earlier checkout of it, same engine, interleaved",
}


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: vllm-nnrp bench NAME [ARGS...]\n\nbenchmarks:")
        for name, doc in BENCHMARKS.items():
            print(f"  {name:<8} {doc}")
        return 0 if args else 2
    name = args[0]
    if name not in BENCHMARKS:
        print(f"vllm-nnrp bench: unknown benchmark {name!r} (try --help)", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"{__name__}.{name.replace('-', '_')}")
    except ModuleNotFoundError as exc:
        print(f"vllm-nnrp bench {name}: not available here ({exc})", file=sys.stderr)
        return 2
    return int(module.main(args[1:]) or 0)
