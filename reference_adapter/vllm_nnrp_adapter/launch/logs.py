"""Where the adapter's log lines go: to vLLM's own handlers (on the ``vllm`` logger), in both
start-up paths, at the operator's level.

The root logger cannot be trusted for this: once vLLM (and torch under it) is imported, the
root handler's level is ERROR, so our INFO lines (``vllm-nnrp serving: …``, the plugin's
start-up line) vanished on the explicit path. The ``SHUTDOWN`` line is printed, not logged.
"""

from __future__ import annotations

import logging

__all__ = ["ADAPTER_LOGGER", "route_logs"]

#: the parent of every logger of the adapter
ADAPTER_LOGGER = "vllm_nnrp_adapter"


def route_logs(level: str | None = None) -> None:
    """Send our log lines where vLLM's go, once; ``level`` (a level name) if given, else the
    level already set (INFO when none is)."""
    ours = logging.getLogger(ADAPTER_LOGGER)
    if level is not None:
        level = level.strip().upper()
        ours.setLevel(level if level in logging.getLevelNamesMapping() else "INFO")
    elif ours.level == logging.NOTSET:
        ours.setLevel("INFO")
    if ours.handlers:
        return
    vllm_handlers = logging.getLogger("vllm").handlers
    if vllm_handlers:
        for handler in vllm_handlers:
            ours.addHandler(handler)
        ours.propagate = False
        return
    if not logging.getLogger().handlers:
        # vLLM's logging configuration is off (VLLM_CONFIGURE_LOGGING=0) and nobody else
        # configured logging: without a handler INFO lines would vanish
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(levelname)s %(asctime)s %(name)s: %(message)s")
        )
        ours.addHandler(handler)
        ours.propagate = False
