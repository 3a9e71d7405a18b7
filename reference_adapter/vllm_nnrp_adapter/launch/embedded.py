"""The embedded default's engine: which interpreter runs real vLLM (explicit, current, or the
cached venv scripts/vllm-venv builds), the environment its CPU worker needs, the tiny local
model, the engine flags (``vllm serve``'s own) and its embeddings engine, and the vLLM version
an interpreter holds. Needs no GPU and no hand set-up; everything that starts the adapter on
real vLLM (``vllm-nnrp conformance``, the benchmarks, the real-vLLM tests, the release run)
starts from here.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from ..profile.policy import NEWEST_TESTED
from ..vllm_backend.families import family_for

__all__ = [
    "CACHE_ROOT",
    "EMBEDDED_ENGINE_ARGS",
    "REPO_ROOT",
    "TCMALLOC",
    "TINY_MODEL_NAME",
    "ConformanceSetupError",
    "embedded_embeddings_engine",
    "engine_environment",
    "tiny_model",
    "vllm_api_server_module",
    "vllm_python",
    "vllm_version_of",
]

REPO_ROOT = Path(__file__).resolve().parents[3]


CACHE_ROOT = Path(os.environ.get("NNRP_CACHE", Path.home() / ".cache" / "nnrp-conformance"))


TINY_MODEL_NAME = "tiny-model"


TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


#: engine flags of the embedded default (tiny model, CPU): vLLM's own `vllm serve` flags
EMBEDDED_ENGINE_ARGS: tuple[str, ...] = (
    "--served-model-name",
    TINY_MODEL_NAME,
    "--dtype",
    "bfloat16",
    "--max-model-len",
    "512",
    "--enforce-eager",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--seed",
    "0",
    # Under a forced (named) tool call the grammar decides among allowed tokens; forbidding
    # free whitespace keeps the tiny model's arguments compact and complete (docs/vllm-cpu.md).
    "--structured-outputs-config",
    '{"backend": "xgrammar", "disable_any_whitespace": true}',
)


def embedded_embeddings_engine(model_dir: Path) -> str:
    """The embedded default's embeddings engine (``--nnrp-embeddings-engine``): the same tiny
    model with a pooling runner (``--convert embed``: it is a generative architecture), served
    under the same name, so one model id answers chat, Responses and embeddings.

    Mean pooling: the tiny model's hidden state at a position is the embedding of that token
    alone (tiny_model.py), so vLLM's default for a converted Llama, the last token, gave every
    text that ends alike (a full stop; one token) the same vector, and the suite's
    ``embeddings.order`` rightly failed it. The mean over the tokens differs with the text.

    float32, not the chat engine's bfloat16: vLLM 0.32.0's CPU attention kernel for bfloat16
    runs AMX instructions without asking the kernel for AMX first, so a worker whose first
    forward pass has 4 tokens or fewer dies of SIGILL (an embeddings request "Hi." is one; its
    own HTTP server dies the same way; docs/vllm-cpu.md#amx). float32 takes another kernel, on
    every version alike."""
    keep = ("--served-model-name", "--max-model-len", "--seed")
    flags = [x for i, a in enumerate(EMBEDDED_ENGINE_ARGS) if a in keep
             for x in (a, EMBEDDED_ENGINE_ARGS[i + 1])]
    return shlex.join([str(model_dir), "--runner", "pooling", "--convert", "embed",
                       "--pooler-config", '{"seq_pooling_type": "MEAN"}', "--enforce-eager",
                       "--dtype", "float32", *flags])


class ConformanceSetupError(RuntimeError):
    """The embedded default could not be prepared; the message says what to do."""


def vllm_python(version: str | None = None, *, build: bool = True) -> str:
    """The interpreter that runs the engine: explicit, current, or the cached venv."""
    explicit = os.environ.get("VLLM_NNRP_PYTHON")
    if explicit:
        return explicit
    if version is None:
        try:
            import vllm  # noqa: F401

            return sys.executable
        except ImportError:
            version = NEWEST_TESTED
    # scripts/vllm-venv: a venv of this checkout over a shared, content-keyed base venv
    venv_python = REPO_ROOT / ".vllm-venvs" / version / "bin" / "python"
    builder = REPO_ROOT / "scripts" / "vllm-venv"
    if build and builder.is_file():
        # The builder is idempotent: it returns at once when the venv is complete.
        subprocess.run([str(builder), version], check=True)
    if venv_python.is_file():
        return str(venv_python)
    raise ConformanceSetupError(
        f"no vLLM {version} environment: install `nnrp-conformance[vllm]` (vllm-cpu on a "
        f"machine without GPU) or run scripts/vllm-venv {version} from a source checkout"
    )


_VLLM_DISTRIBUTION_VERSION = """
import importlib.metadata as m
for name in ("vllm", "vllm-cpu"):
    try:
        print(m.version(name))
        break
    except m.PackageNotFoundError:
        pass
else:
    raise SystemExit("neither the vllm nor the vllm-cpu distribution is installed")
"""


def vllm_version_of(python: str) -> str:
    """The vLLM version installed for ``python`` (its distribution metadata; no import): the
    ``vllm`` distribution, or the CPU build's ``vllm-cpu`` (the one the test venvs hold)."""
    done = subprocess.run(
        [python, "-c", _VLLM_DISTRIBUTION_VERSION],
        capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise ConformanceSetupError(f"{python} has no vLLM: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def engine_environment(python: str) -> dict[str, str]:
    """Environment the vLLM CPU worker needs (see docs/vllm-cpu.md).

    A venv built by scripts/vllm-venv records it in ``nnrp-vllm-env.json``; otherwise the
    libraries are looked up beside the interpreter (not through its symlink: a venv's
    python points into the base installation, the preload libraries live in the venv).
    """
    env = dict(os.environ)
    venv = Path(python).parent.parent
    recorded = venv / "nnrp-vllm-env.json"
    wanted: dict[str, str] = {}
    if recorded.is_file():
        wanted = json.loads(recorded.read_text(encoding="utf-8"))
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p]
    candidates = wanted.pop("LD_PRELOAD", "").split(":") or []
    candidates += [TCMALLOC, str(venv / "lib" / "libiomp5.so")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and candidate not in preload:
            preload.append(candidate)
    env["LD_PRELOAD"] = ":".join(preload)
    for key, value in wanted.items():
        env.setdefault(key, value)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("TORCHDYNAMO_DISABLE", "1")
    env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def tiny_model(python: str, dest: Path | None = None, *, max_position_embeddings: int = 512) -> Path:
    """Build (or reuse) the tiny local model in ``dest`` with ``python`` (a vLLM venv)."""
    dest = dest or CACHE_ROOT / "models" / "tiny-llama"
    subprocess.run(
        [python, "-m", "vllm_nnrp_adapter.tiny_model", str(dest),
         "--max-position-embeddings", str(max_position_embeddings)],
        check=True,
        env=engine_environment(python),
        stdout=subprocess.DEVNULL,
    )
    return dest


def vllm_api_server_module(python: str) -> str:
    """The module ``python -m`` runs as vLLM's OpenAI API server in ``python``'s vLLM (where
    its version family keeps it)."""
    return family_for(vllm_version_of(python)).api_server_module
