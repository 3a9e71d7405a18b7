"""The checkout layer of scripts/vllm-venv: this checkout's small venv over a shared base venv
(a .pth line that adds the base's site-packages, this checkout's code as an editable install),
re-made when the base or pyproject's packaging metadata changes, and the engine environment
files written beside each venv."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from vllm_venv_steps import BuildError, capture, log

REPO_ROOT = Path(__file__).resolve().parent.parent
# the base's vLLM is found (not imported: 4 s, the base's own import check ran it) and the
# adapter is this checkout's
_WHERE_CHECK = ("import importlib.util, vllm_nnrp_adapter\n"
                "assert importlib.util.find_spec('vllm'), 'vllm is not importable'\n"
                "print(vllm_nnrp_adapter.__file__)")


def write_env_files(venv: Path, env: dict[str, str]) -> None:
    (venv / "nnrp-vllm-env.json").write_text(json.dumps(env, indent=2) + "\n")
    lines = [f"export {k}={v}" for k, v in env.items()]
    (venv / "nnrp-vllm.env").write_text("\n".join(lines) + "\n")


def checkout_root(version: str) -> Path:
    return REPO_ROOT / ".vllm-venvs" / version


PROJECT_STAMP_KEY = "project_metadata_sha256"


def project_metadata_hash() -> str:
    """sha256 of what an editable install reads from pyproject.toml (not ruff/pytest settings)."""
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python < 3.11 running this script: hash the whole file
        return hashlib.sha256(text.encode()).hexdigest()
    data = tomllib.loads(text)
    packaging = {
        "build-system": data.get("build-system"),
        "project": data.get("project"),
        "tool.hatch": data.get("tool", {}).get("hatch"),
    }
    return hashlib.sha256(json.dumps(packaging, sort_keys=True).encode()).hexdigest()


CHECKOUT_STAMP_NAME = "nnrp-checkout-stamp.json"


def site_packages(venv: Path) -> Path:
    return venv / "lib" / "python3.11" / "site-packages"


def checkout_stamp(base: Path) -> dict[str, str]:
    return {"base": str(base), PROJECT_STAMP_KEY: project_metadata_hash()}


def ensure_checkout_venv(version: str, base: Path, python: str, env: dict[str, str]) -> Path:
    """This checkout's venv over the base: the base's packages plus this checkout's code."""
    venv = checkout_root(version)
    stamp_path = venv / CHECKOUT_STAMP_NAME
    want = checkout_stamp(base)
    if stamp_path.is_file() and json.loads(stamp_path.read_text()) == want:
        log(f"reusing checkout venv {venv}")
        write_env_files(venv, env)
        return venv
    if venv.exists():
        log(f"re-making checkout venv {venv} (base or packaging metadata changed)")
        shutil.rmtree(venv)
    capture([python, "-m", "venv", str(venv)], what="create checkout venv")
    # A .pth line that starts with `import` is executed: addsitedir also processes the base's
    # own .pth files, exactly as if the base's site-packages were this venv's.
    (site_packages(venv) / "_nnrp_vllm_base.pth").write_text(
        f"import site; site.addsitedir({str(site_packages(base))!r})\n"
    )
    py = str(venv / "bin" / "python")
    capture([py, "-m", "pip", "install", "-q", "--progress-bar", "off", "--no-deps", "-e",
             str(REPO_ROOT)], what="install this checkout (editable)")
    write_env_files(venv, env)
    where = capture([py, "-c", _WHERE_CHECK], env=dict(os.environ, **env), what="import check")
    if not where.strip().startswith(str(REPO_ROOT)):
        raise BuildError(f"checkout venv imports the adapter from {where.strip()}, not {REPO_ROOT}")
    stamp_path.write_text(json.dumps(want, indent=2) + "\n")
    return venv
