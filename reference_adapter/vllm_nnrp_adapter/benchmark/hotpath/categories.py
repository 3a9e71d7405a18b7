"""Attributing a py-spy profile: which category of work (the stall watchdog, SSE parsing,
mapping, JSON encoding, thread hand-offs, polls, native sends, the server binding, vLLM's own
layers, engine IPC, the HTTP server...) each sampled stack belongs to, by file and function
of its innermost known frame, and the CPU share of each per thread (idle waits left out)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

#: (category, file substring, function names or None for any), matched against each frame;
#: the deepest matching frame of a stack names its category. Order only breaks ties
#: between rules matching the same frame.
CATEGORIES: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    (
        "stall watchdog (per-chunk cancel scope)",
        "anyio/",
        frozenset(
            {
                "fail_after",
                "fail_at",
                "__enter__",
                "__exit__",
                "current_task",
                "get_async_backend",
                "current_time",
                "_deliver_cancellation",
                "_restart_cancellation_in_parent",
                "_parent_cancelled",
                "_timeout",
            }
        ),
    ),
    ("stall watchdog (per-chunk cancel scope)", "vllm_nnrp_adapter/adapter/stall.py", None),
    (
        "SSE parse + json.loads (backend)",
        "vllm_nnrp_adapter/vllm_backend",
        frozenset({"_stream", "_parse_sse", "parse_sse"}),
    ),
    ("mapping (chunk → event)", "vllm_nnrp_adapter/profile/mapping.py", None),
    (
        "mapping (chunk → event)",
        "vllm_nnrp_adapter/adapter/adapter.py",
        frozenset({"map_chunk", "_map_tool_call", "_close_tool_calls"}),
    ),
    ("mapping (chunk → event)", "vllm_nnrp_adapter/profile/profile.py", None),
    (
        "adapter handler loop",
        "vllm_nnrp_adapter/adapter/adapter.py",
        frozenset({"_handle", "handle"}),
    ),
    ("observability", "vllm_nnrp_adapter/observability/observability.py", None),
    ("JSON encode (event → wire bytes)", "nnrp_conformance/wire/codec.py", None),
    (
        "thread hand-offs (enqueue, wake, call_soon_threadsafe)",
        "vllm_nnrp_adapter/nnrp_server",
        frozenset({"enqueue", "wake", "_loop_call", "_wake", "_request_wake", "_wake_pump"}),
    ),
    (
        "thread hand-offs (enqueue, wake, call_soon_threadsafe)",
        "threading.py",
        frozenset(
            {
                "notify",
                "wait",
                "__enter__",
                "__exit__",
                "_release_save",
                "_acquire_restore",
                "_is_owned",
            }
        ),
    ),
    (
        "thread hand-offs (enqueue, wake, call_soon_threadsafe)",
        "asyncio/base_events.py",
        frozenset({"call_soon_threadsafe", "_write_to_self"}),
    ),
    ("poll (native, pump thread)", "vllm_nnrp_adapter/nnrp_server", frozenset({"_run"})),
    (
        "poll (native, pump thread)",
        "nnrp/",
        frozenset({"poll_events", "_poll_native_events_unlocked"}),
    ),
    ("accept thread (native)", "nnrp/", frozenset({"accept_session", "accept"})),
    (
        "native sends",
        "vllm_nnrp_adapter/nnrp_server",
        frozenset(
            {
                "_send_partial",
                "_send_result",
                "send_partial",
                "send_result",
                "send_drop",
                "send_terminal_reply",
                "send_terminal",
                "_send_drop",
                "_send_terminal",
                "_flush",
                "_send_ready",
            }
        ),
    ),
    (
        "server binding (operation task)",
        "vllm_nnrp_adapter/nnrp_server",
        frozenset({"_run_op", "_start_op", "_decode", "_finish", "_diagnostics"}),
    ),
    (
        "vLLM chat stream generator (pydantic, tool parser, SSE string)",
        "vllm/entrypoints/openai/",
        None,
    ),
    ("vLLM chat stream generator (pydantic, tool parser, SSE string)", "vllm/entrypoints/", None),
    ("vLLM tool parser", "tool_parsers", None),
    ("vLLM engine client (output processing, detokenise)", "vllm/v1/engine/", None),
    ("vLLM engine client (output processing, detokenise)", "vllm/v1/metrics", None),
    ("vLLM engine client (output processing, detokenise)", "tokenizers", None),
    ("vLLM engine client (output processing, detokenise)", "vllm/tokenizers", None),
    ("vLLM engine client (output processing, detokenise)", "vllm/transformers_utils", None),
    ("engine IPC (zmq, msgpack)", "zmq/", None),
    ("engine IPC (zmq, msgpack)", "msgspec", None),
    ("HTTP server (uvicorn, starlette, h11/httptools)", "uvicorn/", None),
    ("HTTP server (uvicorn, starlette, h11/httptools)", "starlette/", None),
    ("HTTP server (uvicorn, starlette, h11/httptools)", "fastapi/", None),
    ("HTTP server (uvicorn, starlette, h11/httptools)", "h11/", None),
    ("HTTP server (uvicorn, starlette, h11/httptools)", "httptools/", None),
    ("event loop (select, dispatch)", "asyncio/", None),
    ("event loop (select, dispatch)", "uvloop", None),
)


OTHER = "other"


def parse_raw(text: str) -> Counter[tuple[str, ...]]:
    """py-spy's ``raw`` output (collapsed stacks, ``frame;frame;... count``) → stack counts."""
    out: Counter[tuple[str, ...]] = Counter()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"not a py-spy raw line: {line[:200]!r}")
        out[tuple(stack.split(";"))] += int(count)
    return out


def _frame(frame: str) -> tuple[str, str]:
    """``function (file:line)`` → (function, file)."""
    name, _, rest = frame.partition(" (")
    return name.strip(), rest.rstrip(")").rsplit(":", 1)[0]


def categorise(stack: Sequence[str]) -> str:
    """The category of the deepest frame of ``stack`` (root first) that matches a rule."""
    for frame in reversed(stack):
        qualname, path = _frame(frame)
        name = qualname.rsplit(".", 1)[-1]  # py-spy names methods Class.method
        for category, where, names in CATEGORIES:
            if where in path and (names is None or name in names):
                return category
    return OTHER


def counts(stacks: Mapping[tuple[str, ...], int]) -> Counter[str]:
    out: Counter[str] = Counter()
    for stack, n in stacks.items():
        out[categorise(stack)] += n
    return out


def shares(stacks: Mapping[tuple[str, ...], int]) -> dict[str, float]:
    by = counts(stacks)
    total = sum(by.values()) or 1
    return {k: v / total for k, v in by.most_common()}


#: leaf frames of a thread that waits (py-spy's idle detection misses waits inside native
#: code and some of these): their samples are dropped before a thread's CPU is shared out
IDLE_LEAVES: frozenset[tuple[str, str]] = frozenset(
    {("select", "selectors.py"), ("wait", "threading.py"), ("sleep", "")}
)


def _idle(leaf: str) -> bool:
    qualname, path = _frame(leaf)
    name = qualname.rsplit(".", 1)[-1]
    return any(name == n and where in path for n, where in IDLE_LEAVES)


def by_thread(stacks: Mapping[tuple[str, ...], int]) -> dict[int, tuple[str, Counter[str]]]:
    """py-spy ``--threads`` stacks → per thread id: (thread name, category counts of its
    non-idle samples)."""
    out: dict[int, tuple[str, Counter[str]]] = {}
    for stack, n in stacks.items():
        head, frames = stack[0], stack[1:]
        if not head.startswith("thread (") or not frames:
            continue
        tid_text, _, name = head[len("thread (") :].partition("): ")
        tid = int(tid_text, 0)
        entry = out.setdefault(tid, (name, Counter()))
        if not _idle(frames[-1]):
            entry[1][categorise(frames)] += n
    return out


def attribute(
    cpu_by_tid: Mapping[int, float],
    threads: Mapping[int, tuple[str, Counter[str]]],
    tokens: float,
) -> tuple[dict[str, float], dict[str, float]]:
    """(µs per token by category, µs per token by thread name): each thread's exact CPU is
    shared among the categories of its non-idle samples; a thread py-spy saw no Python frame
    of (native threads: zmq I/O, tokenizer pools) counts as one category of its own."""
    # µs are floats: defaultdicts, not Counters (whose counts are ints)
    by_cat: defaultdict[str, float] = defaultdict(float)
    by_name: defaultdict[str, float] = defaultdict(float)
    for tid, cpu in cpu_by_tid.items():
        us = cpu / tokens * 1e6 if tokens else 0.0
        name, cats = threads.get(tid, ("(native thread)", Counter()))
        by_name[name] += us
        total = sum(cats.values())
        if not total:
            by_cat[f"{name}: no Python frame sampled" if tid in threads else NATIVE] += us
            continue
        for cat, n in cats.items():
            by_cat[cat] += us * n / total
    return _largest_first(by_cat), _largest_first(by_name)


def _largest_first(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` ordered as Counter.most_common orders them: largest first, ties as they came."""
    return dict(sorted(values.items(), key=lambda item: item[1], reverse=True))


NATIVE = "native threads (zmq I/O, tokenizer pools; no Python frames)"
