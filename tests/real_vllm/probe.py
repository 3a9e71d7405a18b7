"""How the real-vLLM tests talk to an adapter: a test client, and vLLM's own request count.

The client's local bounds (connect, a submit or cancel reaching the wire, the engine count's
answer) only end a failure; they judge nothing, so they are generous for a machine whose two
cores also run the engine flat out.
"""

from __future__ import annotations

import os

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.options import API_KEY_ENV

__all__ = ["LOCAL_BOUND_S", "SCHEMA_IGNORED_BY_FORCED_TOOL_CALLS", "connect", "engine_count"]

LOCAL_BOUND_S = 30.0
#: the vLLM releases whose forced tool call (a named function, or "required") does not keep the
#: function's parameter schema with the tiny model on CPU: 0.32.0 streams the arguments
#: ``true``, and its own HTTP server answers the same request the same (measured 2026-12-06).
#: The arguments are vLLM's to choose; what the adapter owes is relaying them unchanged.
SCHEMA_IGNORED_BY_FORCED_TOOL_CALLS = frozenset({"0.32.0"})


#: the key of the shared plugin-path adapter (``VLLM_API_KEY``, as an operator gives it):
#: conftest's ``plugin_adapter``
PLUGIN_KEY = "real-vllm-key-5f2e"


async def connect(address: str) -> NnrpClient:
    """A test client with the local bounds above, authenticated with ``NNRP_API_KEY`` when
    that is set (the shared plugin adapter's key, for the tests that use it: conftest's
    ``plugin_adapter_key``)."""
    return await NnrpClient.connect(address, connect_timeout=LOCAL_BOUND_S,
                                    command_timeout=LOCAL_BOUND_S,
                                    api_key=os.environ.get(API_KEY_ENV))


async def engine_count(client: NnrpClient) -> int:
    """vLLM's own count of unfinished requests, from the discovery operation's diagnostics
    (``engine.unfinished_requests``, vLLM's output processor)."""
    op = await client.submit({"schema_version": contract.SCHEMA_VERSION,
                              "operation": contract.OP_CAPABILITIES_GET, "body": {},
                              "nnrp": {"diagnostics": True}}, timeout=LOCAL_BOUND_S)
    term = await op.result()
    assert term.outcome == contract.TERMINAL_SUCCESS, f"engine count not answered: {term}"
    return int(term.diagnostics["engine"]["unfinished_requests"])
