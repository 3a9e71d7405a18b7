"""The composite GitHub Action (``action.yml``) run step by step on this machine, as a runner would.

Each ``run:`` step is executed with ``bash --noprofile --norc -eo pipefail`` (GitHub's shell for
``shell: bash``), its ``env:`` mapping's ``${{ inputs.NAME }}`` expressions replaced by the
inputs (the action's defaults under the test's values), ``GITHUB_ACTION_PATH`` at this
repository and ``GITHUB_OUTPUT`` a file. The install step installs the suite from this checkout
into a fresh virtual environment (what ``setup-python`` gives a provider's job; its packages come
from PyPI or pip's cache); the other steps run with that environment's Python against the example
endpoint, from an empty working directory (the provider's repository). The upload step
(``actions/upload-artifact``) cannot run here: the test checks it uploads the folder the run
step wrote, also after a failure.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
STEPS: list[dict[str, Any]] = ACTION["runs"]["steps"]
_INPUT = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")


def step(name_part: str) -> dict[str, Any]:
    (found,) = [s for s in STEPS if name_part in s["name"]]
    return found


def inputs(**given: str) -> dict[str, str]:
    values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    values.update({k.replace("_", "-"): v for k, v in given.items()})
    missing = [n for n, spec in ACTION["inputs"].items() if spec.get("required") and n not in
               {k.replace("_", "-") for k in given}]
    assert not missing, f"required inputs not given: {missing}"
    return values


def run_step(spec: dict[str, Any], values: dict[str, str], *, cwd: Path, venv: Path,
             timeout: float = 600) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """One ``run:`` step; returns the process and what it wrote to ``GITHUB_OUTPUT``."""
    assert spec.get("shell") == "bash", spec["name"]
    # inputs reach a script through env only: an input spliced into the script text would be
    # shell injection on the provider's runner
    assert "${{" not in spec["run"], f"{spec['name']}: an expression inside the script"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["GITHUB_ACTION_PATH"] = str(REPO)
    output = cwd / f".github-output-{spec.get('id', 'step')}"
    output.write_text("", encoding="utf-8")
    env["GITHUB_OUTPUT"] = str(output)
    for key, expr in (spec.get("env") or {}).items():
        env[key] = _INPUT.sub(lambda m: values[m.group(1)], str(expr))
    script = cwd / ".step.sh"
    script.write_text(spec["run"], encoding="utf-8")
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return proc, outputs


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh environment with the suite installed by the action's own install step."""
    root = tmp_path_factory.mktemp("action-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    work = root.parent / "work"
    work.mkdir()
    proc, _ = run_step(step("Install"), inputs(target="x", manifest="x"), cwd=work, venv=root,
                       timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nnrp-conformance 0.1" in proc.stdout, proc.stdout
    yield root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_action_passes_a_conformant_endpoint(venv: Path, endpoint: Any,
                                                 tmp_path: Path) -> None:
    values = inputs(target=endpoint.address, manifest=str(endpoint.manifest))
    waited, _ = run_step(step("Wait"), values, cwd=tmp_path, venv=venv)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert f"the target {endpoint.address} answers" in waited.stdout
    ran, outputs = run_step(step("Run the conformance"), values, cwd=tmp_path, venv=venv)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = tmp_path / values["output-dir"]
    assert outputs == {"results": f"{values['output-dir']}/case-results.json",
                       "report": f"{values['output-dir']}/report.html", "exit-code": "0"}
    for name in ("case-results.json", "execution-plan.json", "report.md", "report.html"):
        assert (out / name).is_file(), name
    # the suite that ran is the one installed into the fresh environment, not this checkout's
    # development install
    assert str(venv) in subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import nnrp_conformance; print(nnrp_conformance.__file__)"],
        capture_output=True, text=True, check=True).stdout


def test_the_action_judges_several_targets_as_a_fleet(venv: Path, endpoint: Any,
                                                       start_endpoint: Any,
                                                       tmp_path: Path) -> None:
    with start_endpoint(tmp_path, None, ("--listen", f"ipc://{tmp_path / 'ep.sock'}")) as ipc:
        values = inputs(target=f"{endpoint.address} {ipc.address}",
                        manifest=str(endpoint.manifest))
        waited, _ = run_step(step("Wait"), values, cwd=tmp_path, venv=venv)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert f"the target {endpoint.address} answers" in waited.stdout
        assert f"the target {ipc.address} answers" in waited.stdout
        ran, outputs = run_step(step("Run the conformance"), values, cwd=tmp_path, venv=venv)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = tmp_path / values["output-dir"]
    assert outputs == {"results": values["output-dir"],
                       "report": f"{values['output-dir']}/report.html", "exit-code": "0"}
    assert "fleet verdict: PASSED" in ran.stdout
    assert len(list(out.glob("*/case-results.json"))) == 2  # one folder per target
    assert (out / "report.html").is_file() and (out / "report.md").read_text().startswith(
        "# NNRP openai-compatible/1 conformance: fleet of 2 targets")


def test_the_action_fails_the_step_on_a_failing_recipe(venv: Path, start_endpoint: Any,
                                                       tmp_path: Path) -> None:
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        values = inputs(target=ep.address, manifest=str(ep.manifest), args="--timeout 5")
        ran, outputs = run_step(step("Run the conformance"), values, cwd=tmp_path, venv=venv)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "[event.schema]" in ran.stdout
    assert outputs["exit-code"] == "1"
    # what the upload step then uploads: the folder the run wrote, whatever the outcome
    upload = step("Upload")
    assert upload["if"].startswith("always()")
    assert _INPUT.sub(lambda m: values[m.group(1)], upload["with"]["path"]) == values["output-dir"]
    assert (tmp_path / values["output-dir"] / "case-results.json").is_file()


def test_the_wait_gives_up_on_a_silent_target_with_a_plain_message(venv: Path, endpoint: Any,
                                                                   tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    values = inputs(target=address, manifest=str(endpoint.manifest), wait_seconds="3")
    waited, _ = run_step(step("Wait"), values, cwd=tmp_path, venv=venv)
    assert waited.returncode == 3, waited.stdout + waited.stderr
    assert f"nothing listening on {address}" in waited.stderr
    assert f"::error::the target {address} did not answer within 3 s" in waited.stdout


def test_the_wait_does_not_wait_for_a_broken_manifest(venv: Path, endpoint: Any,
                                                      tmp_path: Path) -> None:
    values = inputs(target=endpoint.address, manifest="no-such-manifest.json",
                    wait_seconds="600")
    waited, _ = run_step(step("Wait"), values, cwd=tmp_path, venv=venv, timeout=60)
    assert waited.returncode == 2, waited.stdout + waited.stderr
    assert "no-such-manifest.json" in waited.stderr


def test_the_documented_step_uses_the_action_as_it_is() -> None:
    """docs/ci.md's five-line step: the action's required inputs, and no input it lacks."""
    page = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    first = re.findall(r"^```yaml\n(.*?)^```$", page, flags=re.S | re.M)[0]
    (documented,) = yaml.safe_load(first)
    given = set(documented["with"])
    required = {n for n, spec in ACTION["inputs"].items() if spec.get("required")}
    assert required <= given <= set(ACTION["inputs"]), given
    table = {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \|", page, flags=re.M)}
    assert table == set(ACTION["inputs"]), table


def test_the_action_waits_for_an_endpoint_without_discovery(venv: Path, start_endpoint: Any,
                                                            tmp_path: Path) -> None:
    """Issue 27 item 7: the wait step gets the run's capability file and model, so an
    endpoint without the discovery operation (recommended, not required) is waited for and
    run like any other."""
    doc = tmp_path / "capabilities.json"
    doc.write_text(json.dumps({
        "profile": "openai-compatible", "schema_version": "openai-compatible/1",
        "adapter": "minimal-endpoint", "compatibility_levels": [1],
        "operations": [{"name": "chat.completions.create", "streaming": True,
                        "non_streaming": True, "tool_calls": True, "cancellation": True}],
        "models": [{"id": "minimal-model", "owned_by": "minimal-endpoint"}]}))
    with start_endpoint(tmp_path, None, ("--variant", "upstream-names")) as ep:
        values = inputs(target=ep.address, manifest=str(ep.manifest), capabilities=str(doc),
                        model="minimal-model")
        waited, _ = run_step(step("Wait"), values, cwd=tmp_path, venv=venv)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        ran, outputs = run_step(step("Run the conformance"), values, cwd=tmp_path, venv=venv)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert outputs["exit-code"] == "0"
    assert "warning" not in ran.stdout.lower()
