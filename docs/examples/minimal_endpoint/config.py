"""How one minimal-endpoint process is set up (``Config``) and where it reports (``log``).

``Config`` is what ``main`` read from the command line: the served model, the levels (and so
the planners of the operations above chat), the one defect or conformant variant switched
on (with the freedoms of ``every-freedom``), and the simulated time per token.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from discovery_profile import plan_embeddings, plan_models
from envelope import OP_EMBEDDINGS, OP_MODELS, OP_RESPONSES, Planner
from responses_profile import plan_responses

#: the operations each level adds to chat (docs/levels.md#claims)
LEVEL_PLANNERS: dict[int, dict[str, Planner]] = {
    2: {OP_RESPONSES: plan_responses},
    3: {OP_MODELS: plan_models, OP_EMBEDDINGS: plan_embeddings},
}


def log(message: str) -> None:
    print(f"[minimal-endpoint] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Config:
    model: str
    defect: str | None
    delta_delay_s: float
    variant: str | None = None
    levels: int = 1
    #: the every-freedom variant's freedoms taken (freedoms.py); empty otherwise
    freedoms: frozenset[str] = frozenset()
    #: ``--api-key``: a session authenticates first (api_key.py); never logged
    api_key: str | None = None
    #: ``--api-key-unenforced`` makes this False: the key claimed, every session served
    enforce_api_key: bool = True

    def planners(self) -> dict[str, Planner]:
        """The planners of the operations above Level 1 that this endpoint serves."""
        out: dict[str, Planner] = {}
        for level in range(2, self.levels + 1):
            out.update(LEVEL_PLANNERS[level])
        return out
