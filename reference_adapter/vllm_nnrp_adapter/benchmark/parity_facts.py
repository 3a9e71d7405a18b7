"""The parity benchmark's fixed facts: the two paths (named after the release policy's
metrics), the answer length, the long prompt's unit and the concurrency levels."""

from __future__ import annotations

from .common import (
    BENCH_PARITY,
    required_metrics,
)

NNRP_TPS, HTTP_TPS = required_metrics(BENCH_PARITY)


NNRP, HTTP = NNRP_TPS.split(".", 1)[0], HTTP_TPS.split(".", 1)[0]


PATHS = (HTTP, NNRP)


MAX_TOKENS = 32


LONG_UNIT = "one two three four five six seven eight nine ten "


CONCURRENCY = (1, 8, 32)


Workload = tuple[str, int]  # (prompt name, concurrency)
