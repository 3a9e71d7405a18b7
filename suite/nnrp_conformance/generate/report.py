"""How a run tells its generated requests: the one line both faces print at the start of
every generating run (the seed included, so any run can be drawn again)."""

from __future__ import annotations

from typing import Any

__all__ = ["generated_line"]


def generated_line(run: Any) -> str:
    """``generated 200 requests from seed 42 (--nnrp-seed 42 draws them again); …``."""
    return (f"generated {len(run.drafts)} requests from seed {run.seed} (--nnrp-seed "
            f"{run.seed} draws them again); shrunk failures are saved in {run.save_dir}")
