"""What a run is asked to do, whichever face asked: :class:`RunOptions` (target, manifest,
recipes, model, parameters, limits, where the artifacts go), their defaults, ``KEY=VALUE``
parameters, and the two errors every bad input becomes (:class:`SetupError`, and
:class:`TargetError` for a target that cannot be reached or used)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance.artifacts import DEFAULT_DIR, Artifacts, report_paths
from nnrp_conformance.runner import DEFAULT_CASE_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S

DEFAULT_TIMEOUT = DEFAULT_CASE_TIMEOUT_S


DEFAULT_IDLE_TIMEOUT = DEFAULT_IDLE_TIMEOUT_S


#: after this many operations in a row (cases, and the discovery operation) during which the
#: endpoint sent no frame at all, the remaining cases fail at once (docs/verdicts.md#bounds)
UNRESPONSIVE_AFTER = 2


DEFAULT_CONNECT_TIMEOUT = 10.0
#: where both faces read the endpoint's API key when no option gives it (an option's value
#: shows in the process list; the variable does not)
API_KEY_ENV = "NNRP_API_KEY"


DEFAULT_RESULTS = DEFAULT_DIR / "case-results.json"


class SetupError(Exception):
    """A run that cannot start; the message is meant for the user as is (no traceback)."""


class TargetError(SetupError):
    """The target cannot be reached or does not deliver a usable capability document."""


def parse_params(items: Sequence[str], *, option: str = "--nnrp-param") -> dict[str, str]:
    """``["A=1", "B=x=y"]`` -> ``{"A": "1", "B": "x=y"}``; a malformed item is a SetupError."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SetupError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


@dataclass
class RunOptions:
    """Everything a run needs; both faces fill it from their own option syntax."""

    target: str | None = None
    manifest: Path | None = None
    recipes: tuple[Path, ...] | None = None
    #: the run-wide model (``--nnrp-model ID``) and each operation's (``OP=ID``):
    #: ``model_choice.parse_model_options``
    model: str | None = None
    models: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    extensions: tuple[str, ...] = ()
    level: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    unresponsive_after: int = UNRESPONSIVE_AFTER
    #: run the selected cases this many at a time on the session (``concurrency.py``)
    concurrency: int = 1
    #: stop the run once this many cases have failed (the CLI's ``--max-failures``; pytest's
    #: own ``--maxfail`` on the plugin face); the cases not run get a skipped record each
    max_failures: int | None = None
    #: non-strict findings (recommendations not followed) fail the run
    strict: bool = False
    #: the capability document as a file, used when the endpoint has no discovery operation
    capabilities_file: Path | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: the endpoint's API key (``--nnrp-api-key`` / ``NNRP_API_KEY``): each session the run
    #: opens authenticates with it first (client ``authenticate``); never shown or recorded
    api_key: str | None = field(default=None, repr=False)
    #: a TLS target's trust anchor (a CA certificate, PEM or DER) and the name its certificate
    #: must carry (default: the target's host): ``wire/tls.py``
    tls_ca: Path | None = None
    tls_server_name: str | None = None
    results: Path | None = None
    plan: Path | None = None
    report: Path | None = None
    #: write each case's frame trace as NDJSON into this folder (``trace.py``)
    trace_dir: Path | None = None
    #: write the run's event stream as NDJSON here (``reports/ndjson.py``)
    report_ndjson: Path | None = None
    #: accepted failures (``baseline.py``); with ``baseline_update`` the file is rewritten
    #: from the run
    baseline: Path | None = None
    baseline_update: bool = False
    #: the provider's OpenAI-compatible HTTP API every request also goes to (``twin/``)
    http_twin: str | None = None
    #: generated requests (``generate/``): how many, from which seed (None: a random one,
    #: printed), and where a shrunk failure is saved (None: ``generated-recipes/`` beside
    #: the case results)
    generate: int = 0
    seed: int | None = None
    generate_save: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)

    def artifacts(self) -> Artifacts:
        def absolute(p: Path) -> Path:
            return p if p.is_absolute() else self.base_dir / p

        results = absolute(self.results or DEFAULT_RESULTS)
        plan = absolute(self.plan) if self.plan else results.parent / "execution-plan.json"
        md = html = None
        if self.report is not None:
            md, html = report_paths(absolute(self.report))
        default_dir = results.parent if self.results is None else None
        ndjson = absolute(self.report_ndjson) if self.report_ndjson is not None else None
        return Artifacts(results, plan, results.parent / "evidence", md, html, default_dir,
                         ndjson)

    def shown(self, path: Path | str) -> str:
        """A path as the run's documents name it: relative to the directory the run started
        in when the two share a directory below the root (so recorded results read the same in
        any clone, e.g. ``../../manifests/adapter.json``), else as given."""
        p = Path(path).resolve()
        base = self.base_dir.resolve()
        with contextlib.suppress(ValueError):
            if os.path.commonpath([p, base]) != p.anchor:
                return Path(os.path.relpath(p, base)).as_posix()
        return str(path)


def load_json_object(path: Path) -> dict[str, Any]:
    """Read a JSON object file for the faces; errors name the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SetupError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SetupError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise SetupError(f"{path}: expected a JSON object")
    return data
