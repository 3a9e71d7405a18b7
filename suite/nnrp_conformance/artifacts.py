"""The files a run writes and how: where the artifacts go (:class:`Artifacts`), the
``--nnrp-report PATH`` pair (:func:`report_paths`) and an atomic JSON write
(:func:`write_json`). The core writes the plan with it and the report handlers their
documents; neither reaches into the other.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_DIR", "Artifacts", "keep_out_of_version_control", "private_tmp", "report_paths",
           "write_json"]

#: where a run writes when not told (relative to the directory it started in)
DEFAULT_DIR = Path("nnrp-conformance")

_IGNORE_ALL = "# written by nnrp-conformance: its default output folder is not source\n*\n"


@dataclass(frozen=True)
class Artifacts:
    results: Path
    plan: Path
    evidence_dir: Path
    report_md: Path | None
    report_html: Path | None
    #: the default folder, when the run writes there (it is kept out of version control)
    default_dir: Path | None = None
    #: the run's event stream as NDJSON (``reports/ndjson.py``)
    report_ndjson: Path | None = None

    def prepare(self) -> None:
        """Make the default folder ignorable before anything lands in it."""
        if self.default_dir is not None:
            keep_out_of_version_control(self.default_dir)

    def written(self) -> list[str]:
        out = [str(self.plan), str(self.results)]
        out += [str(p) for p in (self.report_md, self.report_html, self.report_ndjson)
                if p is not None]
        return out


def keep_out_of_version_control(folder: Path) -> None:
    """Give ``folder`` a ``.gitignore`` of ``*``, as pytest does for ``.pytest_cache``: a run's
    default output in the caller's repository then never shows up as untracked files. An
    existing ``.gitignore`` there is the caller's and is left as it is."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / ".gitignore"
    if not marker.exists():
        marker.write_text(_IGNORE_ALL, encoding="utf-8")


def report_paths(path: str | Path) -> tuple[Path, Path]:
    """``--nnrp-report PATH`` -> (PATH.md, PATH.html).

    A path already ending in ``.md`` or ``.html`` names one of the pair; the other is the
    same stem with the other suffix (``out/report.html`` -> ``out/report.md`` + itself).
    """
    p = Path(path)
    if p.suffix.lower() in (".md", ".html", ".htm"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".md"), p.with_name(p.name + ".html")


def private_tmp(path: Path) -> Path:
    """A temporary name beside ``path`` that no other writer uses: runs that share a folder
    (several at once in one CI workspace) each write their own and rename it into place, the
    last one winning. A fixed ``PATH.tmp`` let one run's rename take another's half-written
    file, and the other's rename then failed (``FileNotFoundError``, a run ending in a setup
    error)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


def write_json(path: Path, document: Any) -> None:
    """Write atomically, so an interrupted run never leaves half a document behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = private_tmp(path)
    try:
        tmp.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
