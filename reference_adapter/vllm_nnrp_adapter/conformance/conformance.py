"""``vllm-nnrp conformance``: the adapter on the embedded default, judged by the suite.

The embedded default needs no GPU and no hand set-up: real vLLM CPU (from the current
interpreter if it has vLLM, else the project's cached venv for the version asked), the
tiny random-weight model created locally, and the adapter on an ephemeral loopback port.
The suite then runs against it from the outside, as a separate pytest process, exactly
as a provider would run it: ``pytest --nnrp-target ADDR --manifest MANIFEST``.

Owns the command: the suite's command line, the manifest a run on a given vLLM line uses,
and the run. The engine it starts is :mod:`..launch.embedded`'s; the adapter process,
:mod:`..launch.adapter_process`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from nnrp_conformance import contract

from ..launch.adapter_process import AdapterProcess
from ..launch.embedded import (
    CACHE_ROOT,
    REPO_ROOT,
    ConformanceSetupError,
    tiny_model,
    vllm_python,
    vllm_version_of,
)
from ..launch.settings import default_manifest_path
from ..profile import profile
from ..profile.policy import NEWEST_TESTED, TESTED_VERSIONS
from ..vllm_backend.families import limitations

__all__ = ["LIMITED_LINE_MANIFEST", "main", "manifest_for_vllm", "run_suite", "suite_command"]


def suite_command(
    address: str, manifest: Path, out_dir: Path, extra: Sequence[str] = ()
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "--nnrp-target",
        address,
        "--manifest",
        str(manifest),
        "--nnrp-results",
        str(out_dir / "case-results.json"),
        "--nnrp-report",
        str(out_dir / "report"),
        "--nnrp-plan",
        str(out_dir / "execution-plan.json"),
        "-p",
        "no:cacheprovider",
        *extra,
    ]


#: the adapter's claims on a line whose vLLM breaks a Level 2 feature (vllm_backend.lines): its
#: capability document there claims exactly this (tests/unit/test_level_claims.py keeps the two
#: equal), so a suite run against that line judges what the adapter offers on it
LIMITED_LINE_MANIFEST = REPO_ROOT / "manifests" / "vllm-nnrp-adapter.vllm-0.18.json"
#: the wheel's copy of it (pyproject.toml's force-include), for an install without a checkout
_PACKAGED_LIMITED_LINE_MANIFEST = Path(__file__).parent.with_name("manifest.vllm-0.18.json")


def manifest_for_vllm(version: str, *, embeddings: bool = False) -> Path:
    """The manifest a suite run against the adapter on vLLM ``version`` uses: with
    ``embeddings`` (the adapter runs an embeddings engine, ``--nnrp-embeddings-engine``) the
    adapter's own; without, the same less ``embeddings.create``, by the rule the capability
    document follows (:func:`..profile.profile.capability_document`), written once under the cache."""
    if limitations(version):
        if LIMITED_LINE_MANIFEST.is_file():
            return LIMITED_LINE_MANIFEST
        return _PACKAGED_LIMITED_LINE_MANIFEST
    full = default_manifest_path()
    if embeddings:
        return full
    manifest = json.loads(full.read_text(encoding="utf-8"))
    claims = profile.capability_document(manifest, [], withheld=[contract.OP_EMBEDDINGS_CREATE])
    claims.pop("models")
    path = CACHE_ROOT / "manifests" / "vllm-nnrp-adapter.without-embeddings.json"
    text = json.dumps(claims, indent=2) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # atomic: parallel test workers may write it at once
    return path


def run_suite(address: str, manifest: Path, out_dir: Path, extra: Sequence[str] = ()) -> int:
    """The suite as a provider runs it, in its own process (it never imports the adapter)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # cwd = the output folder, so no project ini or testpaths is picked up.
    return subprocess.call(suite_command(address, manifest, out_dir, extra), cwd=out_dir)


def main(argv: list[str]) -> int:

    p = argparse.ArgumentParser(
        prog="vllm-nnrp conformance",
        description="Start the adapter on the embedded default (real vLLM CPU, tiny local "
        "model) and run the conformance suite against it.",
    )
    p.add_argument(
        "--vllm-version",
        default=None,
        help=f"use the cached venv of this vLLM version (one of {', '.join(TESTED_VERSIONS)}); "
        f"default: this interpreter's vLLM, else {NEWEST_TESTED}",
    )
    p.add_argument("--model-dir", type=Path, default=None, help="default: the tiny model")
    p.add_argument("--manifest", type=Path, default=None)
    p.add_argument("--out", type=Path, default=Path("artifacts/conformance"))
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)
    out_dir = args.out.resolve()
    try:
        python = vllm_python(args.vllm_version)
        print(f"==> vLLM interpreter: {python}", flush=True)
        model_dir = args.model_dir or tiny_model(python)
        print(f"==> model: {model_dir}", flush=True)
        print("==> starting the adapter (real vLLM CPU engine; about 30-60 s)", flush=True)
        # the embeddings engine where the line can offer Level 3 (manifest_for_vllm)
        embeddings = not limitations(vllm_version_of(python))
        with AdapterProcess(python, model_dir, log_path=out_dir / "adapter.log",
                            embeddings=embeddings) as adapter:
            out_dir.mkdir(parents=True, exist_ok=True)
            print(
                f"==> adapter serving at {adapter.address} "
                f"(vLLM {adapter.info.get('vllm_version')}, up in {adapter.started_in_s:.1f} s)",
                flush=True,
            )
            # by default the claims the adapter keeps on this vLLM line (manifest_for_vllm)
            manifest = (
                args.manifest or manifest_for_vllm(str(adapter.info.get("vllm_version")),
                                                   embeddings=embeddings)
            ).resolve()
            print(f"==> running the conformance suite ({manifest.name})", flush=True)
            return run_suite(adapter.address, manifest, out_dir, args.pytest_args)
    except (ConformanceSetupError, subprocess.CalledProcessError) as exc:
        print(f"vllm-nnrp conformance: {exc}", file=sys.stderr)
        return 2
