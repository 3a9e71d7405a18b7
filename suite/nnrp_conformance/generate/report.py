"""How a run tells its generated requests: the line both faces print at the start of every
generating run (the seed included, so any run can be drawn again), and the line of the
summary that counts the files it saved, by what they show (a failure, or a recommendation
shown and not failed: a non-strict case is shrunk and saved too)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["generated_line", "saved_line"]


def generated_line(run: Any) -> str:
    """``generated 200 requests from seed 42 (--nnrp-seed 42 draws them again); …``."""
    return (f"generated {len(run.drafts)} requests from seed {run.seed} (--nnrp-seed "
            f"{run.seed} draws them again); each failed or non-strict one is shrunk and saved "
            f"in {run.save_dir}")


def _saved_file(record: Any) -> str | None:
    generated = (record.upstream.get("diagnostics") or {}).get("generated")
    path = generated.get("recipe_file") if isinstance(generated, dict) else None
    return path if isinstance(path, str) else None


def saved_line(records: Sequence[Any]) -> str | None:
    """``saved 125 generated requests in DIR: 9 failed, 116 non-strict (…)`` (None: the run
    generated nothing)."""
    generated = [r for r in records if r.id.startswith("generated.")]
    if not generated:
        return None
    saved = [(r, path) for r in generated if (path := _saved_file(r)) is not None]
    if not saved:
        return "no generated request failed or was non-strict: none saved"
    failed = sum(1 for r, _path in saved if r.failed)
    folders = sorted({str(Path(path).parent) for _r, path in saved})
    return (f"saved {len(saved)} generated requests in {', '.join(folders)}: {failed} failed, "
            f"{len(saved) - failed} non-strict (recommendations shown, not failures)")
