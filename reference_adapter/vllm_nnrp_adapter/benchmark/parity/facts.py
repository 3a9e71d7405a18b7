"""The parity benchmark's fixed facts: the paths (HTTP and the NNRP columns, the first two
named after the release policy's metrics), the answer length, the long prompt's unit and the
concurrency levels."""

from __future__ import annotations

from ..lib.results import (
    BENCH_PARITY,
    required_metrics,
)

NNRP_TPS, HTTP_TPS = required_metrics(BENCH_PARITY)


NNRP, HTTP = NNRP_TPS.split(".", 1)[0], HTTP_TPS.split(".", 1)[0]


#: the NNRP columns: (name, client, sessions). ``nnrp`` is what a user runs (a lean client,
#: one session per concurrent stream, as HTTP has one connection per stream): the release
#: gate's parity figures and the issue's targets read it. The others show what a shared
#: session and the suite's recording, judging client cost on top.
LEAN, SUITE = "lean", "suite"
PER_STREAM, ONE_SESSION = "per_stream", "one"
NNRP_ONE = f"{NNRP}_1session"
NNRP_SUITE = f"{NNRP}_suite"
NNRP_SUITE_ONE = f"{NNRP}_suite_1session"
#: ``nnrp_ipc``: the ``nnrp`` column over ``ipc://`` (the same adapter's second listener,
#: ``--nnrp-also-listen``): what a client on the same host (a scheduler, a sidecar) would use
NNRP_IPC = f"{NNRP}_ipc"
IPC_COLUMNS = frozenset({NNRP_IPC})
NNRP_COLUMNS: dict[str, tuple[str, str]] = {
    NNRP: (LEAN, PER_STREAM),
    NNRP_IPC: (LEAN, PER_STREAM),
    NNRP_ONE: (LEAN, ONE_SESSION),
    NNRP_SUITE: (SUITE, PER_STREAM),
    NNRP_SUITE_ONE: (SUITE, ONE_SESSION),
}


PATHS = (HTTP, *NNRP_COLUMNS)


#: the printed table's short name of each path
LABELS = {
    HTTP: "http",
    NNRP: "lean/stream",
    NNRP_IPC: "lean/ipc",
    NNRP_ONE: "lean/1 sess",
    NNRP_SUITE: "suite/stream",
    NNRP_SUITE_ONE: "suite/1 sess",
}


MAX_TOKENS = 32


LONG_UNIT = "one two three four five six seven eight nine ten "


CONCURRENCY = (1, 8, 32)


Workload = tuple[str, int]  # (prompt name, concurrency)
