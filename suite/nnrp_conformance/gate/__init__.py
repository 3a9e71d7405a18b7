"""The release gate: judge recorded evidence against the five release conditions.

``nnrp-conformance gate --evidence DIR`` reads the evidence tree below (written by the
release regeneration command; ``DIR`` defaults to ``evidence.DEFAULT_EVIDENCE_DIR``), checks
each condition of ``contract.RELEASE_GATES`` and builds the release-gate report document
(validated against ``release-gate-report``); the face writes it with its Markdown and HTML
pages (``reports/gate_files.py``) when ``--out`` asks.

Evidence layout (``DIR``)::

    DIR/
      manifest.json                 the adapter manifest the runs used (or pass --manifest)
      release-policy.json           the provider's release policy (or pass --policy): the
                                    serving target (name, KEY), its version lines (each:
                                    range, lower bound, current line, levels claimed per
                                    tested version), the benchmarks and README extras
                                    required (schema ``release-policy``; the reference
                                    adapter's is
                                    manifests/vllm-nnrp-adapter.release-policy.json)
      bench/*.json                  version-independent benchmark-results (wire, mapper)
      KEY-<version>/                one per version of the serving target run (KEY from the
                                    policy; the reference adapter's: vllm-<version>/)
        manifest.json               optional: the manifest this version's run used when the
                                    version claims less than the adapter (a level its
                                    serving-target version cannot keep); never more
        case-results.json           the suite's case results (upstream case-results format;
                                    our evidence in diagnostics: level, status, selection,
                                    findings, duration_s)
        execution-plan.json         the plan that run executed (upstream execution-plan)
        smoke.json                  the end-to-end smoke, case-results format: one result per
                                    smoke request with the full recorded ``events`` and
                                    ``diagnostics.KEY`` = the target version it ran on
        bench/*.json                version-dependent benchmark-results (streaming-latency,
                                    …), ``versions.KEY`` = version

Benchmark documents are found by their ``name`` (file names are free); the required names
and metrics are the policy's ``benchmarks``. The reports and logs a
release run writes beside them (:data:`nnrp_conformance.gate.evidence.VERSION_FILES`, listed
in docs/benchmarks.md) are judged by nothing: the reports link each one present. Every path in
the reports is relative to ``DIR``.

The five conditions hold for every line the policy declares; its gated versions are the
line's lower bound (exactly) and the newest recorded ``CURRENT_LINE.x`` of the line, and every
failure names the line it is about:

``level1_implemented`` (the name is kept from the Level 1 release; it covers every level)
    the manifest claims Level 1 (``chat.completions.create`` streaming and non-streaming);
    for each gated version, the manifest its run used (its own ``manifest.json``, else the
    adapter's) claims exactly the levels the line's ``levels`` declare for that version, and
    the recorded plan selected every mandatory recipe of each claimed level and every
    optional one claimed (the planner re-run on the recipes and the manifest says which; the
    case results must not contradict it). The details list per level and per version what
    was claimed; the reports show it as the Levels table.
``recipes_pass``
    every case of those plans has a ``passed`` result.
``benchmark_baseline``
    every required benchmark is present, schema-valid, carries its metrics, with machine and
    versions recorded (per-version ones under each line's current-line directory); no
    schema-invalid benchmark file anywhere.
``vllm_smoke`` (the serving target's smoke; the id is kept from the first provider)
    each gated version has a passing smoke whose events the gate re-judges as a
    profile-valid answer, valid case results, and is inside its line.
``readme_documents``
    README.md documents each line's range, lower bound and current line tested, and the
    policy's extras; where it shows the KEY extra's specifier, and in a ``pyproject.toml``
    beside it, that is the lines joined.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from nnrp_conformance import contract, validation
from nnrp_conformance.gate.conditions import GateInputs, GateVerdict, judge_all
from nnrp_conformance.gate.evidence import (
    MANIFEST_FILE,
    POLICY_FILE,
    EvidenceError,
    check_evidence_root,
    evidence_files,
    load_evidence,
    relative_to_evidence,
)
from nnrp_conformance.gate.requirements import Requirements, RequirementsError, load_policy
from nnrp_conformance.gate.verdicts import recorded_versions
from nnrp_conformance.manifest import ManifestError, load_manifest
from nnrp_conformance.recipes import RecipeError, load_recipes

__all__ = [
    "EvidenceError",
    "GateResult",
    "GateVerdict",
    "Requirements",
    "RequirementsError",
    "resolve_policy",
    "run_gate",
]


_OUTCOME_RANK = {contract.OUTCOME_PASSED: 0, contract.OUTCOME_SKIPPED: 1,
                 contract.OUTCOME_FAILED: 2}


@dataclass
class GateResult:
    verdicts: list[GateVerdict]
    report: dict[str, Any]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def failed(self) -> list[GateVerdict]:
        return [v for v in self.verdicts if not v.passed]


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _environment(inputs: GateInputs, report_dir: Path) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "nnrp_py": _dist_version("nnrp-py"),
        "suite": _dist_version("nnrp-conformance"),
        "vllm": ", ".join(recorded_versions(inputs.evidence, inputs.requirements)) or None,
        "adapter": inputs.manifest.adapter if inputs.manifest else None,
        "declared_vllm_line": inputs.requirements.declared_line,
        "vllm_lines": "; ".join(line.declared for line in inputs.requirements.lines),
        # where the evidence folder is from the report; every path inside is relative to it
        "evidence_dir": relative_to_evidence(inputs.evidence.root, report_dir),
    }
    for _, doc in inputs.evidence.all_benchmarks():
        if doc.ok:
            machine = doc.data["machine"]
            env["bench_cpu"] = machine["cpu"]
            env["bench_cores"] = machine["cores"]
            env["bench_python"] = machine["python"]
            env["bench_platform"] = machine["platform"]
            break
    return env


def _recipe_rows(verdicts: list[GateVerdict], target: str) -> list[dict[str, Any]]:
    """One row per recipe: its worst outcome over the gated versions, naming where it failed."""
    tables = next(v for v in verdicts if v.name == contract.GATE_RECIPES_PASS).details.get(
        "versions", {})
    merged: dict[str, dict[str, Any]] = {}
    notes: dict[str, list[str]] = {}
    for version, rows in tables.items():
        for row in rows:
            prior = merged.get(row["id"])
            if row.get("message"):
                notes.setdefault(row["id"], []).append(f"{target} {version}: {row['message']}")
            if prior is None or _OUTCOME_RANK[row["outcome"]] > _OUTCOME_RANK[prior["outcome"]]:
                merged[row["id"]] = {k: v for k, v in row.items() if k != "message"}
    out = []
    for case_id, row in merged.items():
        if case_id in notes:
            row["message"] = "; ".join(notes[case_id])[:65536]
        out.append(row)
    return out


def _inputs(evidence_dir: Path, readme: Path, manifest: Path | None, recipes: Path | None,
            requirements: Requirements) -> GateInputs:
    ev = load_evidence(evidence_dir, requirements.target_key)
    manifest_path = manifest or (ev.root / MANIFEST_FILE)
    loaded = None
    problem = None
    if manifest is None and not manifest_path.is_file():
        problem = f"{ev.rel(manifest_path)} is missing (record it there or pass --manifest)"
    else:
        try:
            loaded = load_manifest(manifest_path)
        except ManifestError as exc:
            # the manifest's own error names the path as given; the report names it portably
            problem = str(exc).replace(str(manifest_path), ev.rel(manifest_path))
    recipe_list = None
    recipes_problem = None
    try:
        recipe_list = load_recipes([recipes] if recipes is not None else None)
    except RecipeError as exc:
        recipes_problem = str(exc)
    except FileNotFoundError as exc:
        recipes_problem = f"no recipes: {exc}"
    return GateInputs(ev, requirements, readme, loaded, manifest_path, problem, recipe_list,
                      recipes_problem)


def resolve_policy(evidence_dir: Path, policy: Path | None = None) -> Requirements:
    """The requirements of the release policy ``policy``, by default the one recorded in
    ``evidence_dir``; raises :class:`EvidenceError` / :class:`RequirementsError` saying what
    is missing or wrong."""
    if policy is not None:
        return load_policy(policy)
    path = check_evidence_root(evidence_dir) / POLICY_FILE
    if not path.is_file():
        raise RequirementsError(
            f"{path}: no release policy: record the provider's policy there or pass --policy"
        )
    return load_policy(path)


def run_gate(evidence_dir: Path, *, readme: Path = Path("README.md"),
             manifest: Path | None = None, recipes: Path | None = None,
             requirements: Requirements | None = None, policy: Path | None = None,
             now: datetime | None = None, report_dir: Path | None = None) -> GateResult:
    """Judge ``evidence_dir``; the report is schema-valid (``release-gate-report``).

    The requirements are ``requirements`` if given, else the release policy ``policy``
    (default ``evidence_dir/release-policy.json``); a missing or broken policy raises
    :class:`RequirementsError` naming the file and field.

    Every path in the report is relative to the evidence folder, and
    ``environment.evidence_dir`` is that folder relative to ``report_dir`` (where the reports
    are written; default the evidence folder itself, i.e. ``.``), so the reports and their
    links hold in any clone and from any working directory."""
    if requirements is None:
        requirements = resolve_policy(Path(evidence_dir), policy)
    inputs = _inputs(Path(evidence_dir), Path(readme), manifest, recipes, requirements)
    verdicts = judge_all(inputs)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    report = {
        "$schema": validation.schema_uri("release-gate-report"),
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "generated_at": stamp,
        "passed": all(v.passed for v in verdicts),
        "gates": [v.to_json() for v in verdicts],
        "environment": _environment(inputs, Path(report_dir or evidence_dir)),
        "recipes": _recipe_rows(verdicts, inputs.requirements.target),
        "files": evidence_files(inputs.evidence),
    }
    validation.check("release-gate-report", report)
    return GateResult(verdicts, report)
