"""The documentation: strict mkdocs build, the generated reference, and the provider CI workflow."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nnrp_conformance import contract

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
WORKFLOW = DOCS / "ci" / "github-actions.yml"
CI_PAGE = DOCS / "ci.md"


def _hook():
    spec = importlib.util.spec_from_file_location(
        "schema_reference", DOCS / "hooks" / "schema_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_strict_build_succeeds(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for page in ("index.html", "quickstart.html", "reference/error-codes.html",
                 "reference/events.html", "changelog.html"):
        assert (site / page).is_file(), page
    assert not (site / "hooks").exists()


def test_reference_covers_every_schema_and_error_code() -> None:
    pytest.importorskip("mkdocs")
    pages = _hook().render_pages()
    codes = pages["reference/error-codes.md"]
    for code, family in contract.ERROR_CODES.items():
        assert re.search(rf"\| `{re.escape(code)}` \| `{re.escape(family)}` \|", codes), code
    events = pages["reference/events.md"]
    for event_type in contract.EVENT_TYPES:
        assert f"## {event_type} " in events, event_type
    schema_files = sorted(p.name for p in
                          (REPO / "suite" / "nnrp_conformance" / "schemas").glob("*.schema.json"))
    text = "\n".join(pages.values())
    for name in schema_files:
        assert f"Schema file `{name}`" in text, name


def test_the_generated_reference_pages_are_checked_in_and_current() -> None:
    """Issue 27 item 9: the reference pages exist in the repository as the schemas make them
    (regenerate: python docs/hooks/schema_reference.py)."""
    pytest.importorskip("mkdocs")
    assert _hook().stale_pages(DOCS) == []


#: a Markdown link (not an image): its target, without a title
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _broken_links(files: list[Path]) -> list[tuple[Path, str]]:
    broken = []
    for path in files:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for match in _LINK.finditer(text):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            local = target.split("#", 1)[0]
            if local and not (path.parent / local).exists():
                broken.append((path, target))
    return broken


def test_every_link_resolves_in_the_repository_as_checked_in(tmp_path: Path) -> None:
    """Issue 27 item 9: a reader of the repository (not only of the built site) can follow
    every relative link of the docs and the README."""
    files = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    assert len(files) > 20
    assert [f"{p.relative_to(REPO)}: {t}" for p, t in _broken_links(files)] == []
    page = tmp_path / "page.md"  # the check itself can fail
    page.write_text("[ok](page.md) [gone](missing.md#x) [web](https://example.com) [a](#b)\n")
    assert [t for _, t in _broken_links([page])] == ["missing.md#x"]


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def test_workflow_is_valid_yaml_with_the_expected_steps() -> None:
    doc = _workflow()
    assert doc["name"] == "nnrp-conformance"
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
    assert "on" in doc or True in doc
    steps = doc["jobs"]["conformance"]["steps"]
    names = [s.get("name", "") for s in steps]
    assert names.index("Start the endpoint") < names.index("Run the conformance suite")
    suite = next(s for s in steps if s.get("name") == "Run the conformance suite")
    for flag in ("--nnrp-target", "--manifest", "--nnrp-results", "--nnrp-report"):
        assert flag in suite["run"], flag
    # the suite runs as pytest (after collecting the optional capability file and model)
    assert any(line.strip().startswith("pytest ") for line in suite["run"].splitlines())
    for step in (suite, next(s for s in steps if s.get("name") == "Wait for the endpoint")):
        assert "NNRP_CAPABILITIES" in step["run"] and "NNRP_MODEL" in step["run"], step["name"]
    assert "continue-on-error" not in suite  # a failed recipe must fail the job
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    paths = upload["with"]["path"]
    assert "case-results.json" in paths and "report.html" in paths


def test_ci_page_embeds_the_same_workflow() -> None:
    page = CI_PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```$", page, flags=re.S | re.M)
    assert blocks, "docs/ci.md has no ```yaml block"
    assert WORKFLOW.read_text(encoding="utf-8") in blocks


def test_quickstart_command_uses_the_plugin_options() -> None:
    quickstart = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    assert "pytest --nnrp-target 127.0.0.1:40613 --manifest manifest.json" in quickstart
    assert "nnrp-conformance init --target" in quickstart
