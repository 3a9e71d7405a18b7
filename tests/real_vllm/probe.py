"""How the real-vLLM tests talk to an adapter across machine stalls (``stalls.py``).

The test client's own local bounds (connect, a submit or cancel reaching the wire, the engine
count's answer) are a minute, because a stall can last 25-30 s on the CI machine class; a 10 s
bound once ran out inside one and failed a test although neither side was at fault. These
bounds only end a failure; what the tests judge is the adapter's, net of stalls.
"""

from __future__ import annotations

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient

__all__ = ["LOCAL_BOUND_S", "connect", "engine_count"]

LOCAL_BOUND_S = 60.0


async def connect(address: str) -> NnrpClient:
    """A test client whose local bounds ride out a machine stall."""
    return await NnrpClient.connect(address, connect_timeout=LOCAL_BOUND_S,
                                    command_timeout=LOCAL_BOUND_S)


async def engine_count(client: NnrpClient) -> int:
    """vLLM's own count of unfinished requests, from the discovery operation's diagnostics
    (``engine.unfinished_requests``, vLLM's output processor)."""
    op = await client.submit({"schema_version": contract.SCHEMA_VERSION,
                              "operation": contract.OP_CAPABILITIES_GET, "body": {},
                              "nnrp": {"diagnostics": True}}, timeout=LOCAL_BOUND_S)
    term = await op.result()
    assert term.outcome == contract.TERMINAL_SUCCESS, f"engine count not answered: {term}"
    return int(term.diagnostics["engine"]["unfinished_requests"])
