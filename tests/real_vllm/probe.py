"""How the real-vLLM tests talk to an adapter across machine stalls (``stalls.py``).

The test client's own local bounds (connect, a submit or cancel reaching the wire, the engine
count's answer) are a minute, because a stall can last 25-30 s on the CI machine class; a 10 s
bound once ran out inside one and failed a test although neither side was at fault. A stall of
127 s was seen once too (the cancel storm on 0.22.1, stop 25's CI): a connect whose minute the
machine mostly spent stopped is therefore tried again, so the connect bound is judged on the
time the machine ran. These bounds only end a failure; what the tests judge is the adapter's,
net of stalls.
"""

from __future__ import annotations

import time

from stalls import MACHINE

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError

__all__ = ["CONNECT_TRIES", "LOCAL_BOUND_S", "connect", "engine_count"]

LOCAL_BOUND_S = 60.0
CONNECT_TRIES = 3  # a connect is retried only when a stall ate its bound: at most this many tries


async def connect(address: str) -> NnrpClient:
    """A test client whose local bounds ride out a machine stall.

    A connect that ran out of its bound is tried again when the machine ran for less than half
    of it (the rest was a recorded stall), at most ``CONNECT_TRIES`` times; a connect refused,
    or one that had the machine for most of its bound and still got no session, fails at once.
    """
    MACHINE.start()
    for attempt in range(1, CONNECT_TRIES + 1):
        t0 = time.monotonic()
        try:
            return await NnrpClient.connect(address, connect_timeout=LOCAL_BOUND_S,
                                            command_timeout=LOCAL_BOUND_S)
        except NnrpClientError as exc:
            t1 = time.monotonic()
            stalled = MACHINE.stalled_between(t0, t1)
            ran = t1 - t0 - stalled
            if t1 - t0 < LOCAL_BOUND_S or ran >= LOCAL_BOUND_S / 2 or attempt == CONNECT_TRIES:
                if stalled:
                    raise NnrpClientError(f"{exc} (try {attempt} of {CONNECT_TRIES}; the machine "
                                          f"ran {ran:.1f} s of it, stalled {stalled:.1f} s)") from exc
                raise
            print(f"connect to {address}: try {attempt} ran out inside a machine stall "
                  f"({stalled:.1f} s of {t1 - t0:.1f} s); trying again")
    raise AssertionError("unreachable: the last try returns or raises")


async def engine_count(client: NnrpClient) -> int:
    """vLLM's own count of unfinished requests, from the discovery operation's diagnostics
    (``engine.unfinished_requests``, vLLM's output processor)."""
    op = await client.submit({"schema_version": contract.SCHEMA_VERSION,
                              "operation": contract.OP_CAPABILITIES_GET, "body": {},
                              "nnrp": {"diagnostics": True}}, timeout=LOCAL_BOUND_S)
    term = await op.result()
    assert term.outcome == contract.TERMINAL_SUCCESS, f"engine count not answered: {term}"
    return int(term.diagnostics["engine"]["unfinished_requests"])
