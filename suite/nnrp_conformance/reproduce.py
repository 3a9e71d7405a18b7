"""The one command that re-runs one case: same target, manifest, model, parameters and bounds,
only that case's recipe file, its results written apart so the run being read is not
overwritten.

Whichever face ran the suite, the command is the CLI's (``nnrp-conformance run``): it is
installed with the suite, runs the same core, and in a provider's repository does not collect
the provider's own tests. Paths are absolute, so the command works from any directory.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from nnrp_conformance.options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TIMEOUT,
    RunOptions,
)

__all__ = ["REPRODUCE_DIR", "reproduce_command"]

#: beside the run's case results: where a reproduce command writes its own
REPRODUCE_DIR = "reproduce"


def _absolute(path: Path, base: Path) -> str:
    return str(path if path.is_absolute() else (base / path).resolve())


def reproduce_command(options: RunOptions, recipe_path: Path, case_id: str,
                      model_id: str | None) -> str:
    """A shell command re-running ``case_id`` (from ``recipe_path``) as ``options`` ran it."""
    base = options.base_dir
    argv = ["nnrp-conformance", "run", "--target", str(options.target)]
    if options.manifest is not None:
        argv += ["--manifest", _absolute(options.manifest, base)]
    argv += ["--recipes", _absolute(Path(recipe_path), base)]
    # the model the run used, pinned: a re-run must not pick another one from a changed
    # capability document
    if model_id:
        argv += ["--model", model_id]
    for key, value in options.params.items():
        argv += ["--param", f"{key}={value}"]
    for name in options.extensions:
        argv += ["--extension", name]
    if options.level is not None:
        argv += ["--level", str(options.level)]
    if options.timeout != DEFAULT_TIMEOUT:
        argv += ["--timeout", f"{options.timeout:g}"]
    if options.idle_timeout != DEFAULT_IDLE_TIMEOUT:
        argv += ["--idle-timeout", f"{options.idle_timeout:g}"]
    if options.connect_timeout != DEFAULT_CONNECT_TIMEOUT:
        argv += ["--connect-timeout", f"{options.connect_timeout:g}"]
    if options.strict:
        argv.append("--strict")
    if options.capabilities_file is not None:
        argv += ["--capabilities", _absolute(options.capabilities_file, base)]
    # a TLS target's trust anchor and name; never the API key: a re-run reads NNRP_API_KEY
    if options.tls_ca is not None:
        argv += ["--tls-ca", _absolute(options.tls_ca, base)]
    if options.tls_server_name:
        argv += ["--tls-server-name", options.tls_server_name]
    if options.http_twin:  # a twin difference shows only with the twin
        argv += ["--http-twin", options.http_twin]
    results = options.artifacts().results.parent / REPRODUCE_DIR / case_id / "case-results.json"
    argv += ["--results", str(results)]
    return shlex.join(argv)
