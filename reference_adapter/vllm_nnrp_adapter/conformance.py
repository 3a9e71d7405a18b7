"""``vllm-nnrp conformance``: the adapter on the embedded default, judged by the suite.

The embedded default needs no GPU and no hand set-up: real vLLM CPU (from the current
interpreter if it has vLLM, else the project's cached venv for the version asked), the
tiny random-weight model created locally, and the adapter on an ephemeral loopback port.
The suite then runs against it from the outside, as a separate pytest process, exactly
as a provider would run it: ``pytest --nnrp-target ADDR --manifest MANIFEST``.

:class:`AdapterProcess` is the reusable part: the real-vLLM tests, the benchmarks and the
evidence regeneration start the adapter through it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance import contract

from . import NEWEST_TESTED, TESTED_VERSIONS, proc_cpu, profile
from .processes import (
    listening_tcp_ports,
    process_tree,
    shm_files_in_use,
    start_process_group,
    stop_process_group,
)
from .scaleout import path_for_rank
from .settings import ENV_LISTEN, ENV_PREFIX, default_manifest_path
from .vllm_backend.families import family_for, limitations
from .vllm_plugin import MIDDLEWARE

REPO_ROOT = Path(__file__).resolve().parents[2]


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


def _has_vllm(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import vllm"], capture_output=True, timeout=300)
    return probe.returncode == 0


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


STARTUP_PATHS = ("explicit", "vllm-plugin")


@dataclass
class AdapterProcess:
    """The adapter in a child process on an ephemeral loopback port, by either start-up path.

    ``startup_path="explicit"``: ``vllm-nnrp serve``; ``extra_args`` are more ``--nnrp-*``
    flags. ``"vllm-plugin"``: vLLM's own OpenAI API server (``python -m
    vllm.entrypoints.openai.api_server``, HTTP on an ephemeral loopback port) with
    ``--middleware vllm_nnrp_adapter.vllm_plugin.NnrpServing`` and ``NNRP_PLUGIN_LISTEN``;
    ``extra_args`` are more vLLM flags, ``extra_env`` more ``NNRP_PLUGIN_*`` settings.
    ``listen`` is the NNRP listen address (any transport: ``ipc:///PATH``, ``ws://HOST:0``).
    ``vllm_serve``, with the plugin path: the arguments after the interpreter that run vLLM's
    own ``vllm serve`` (e.g. a script calling ``vllm.entrypoints.cli.main``) instead of the
    single-API-server module; several API servers and data parallelism live only there. The
    model is then given as ``vllm serve``'s positional.
    Either way ``info`` is the ready file's start-up information (API server 0's with several,
    :meth:`api_server_infos` for all); ``address`` is a target the suite takes as is.
    """

    python: str
    model_dir: Path
    engine_args: Sequence[str] = EMBEDDED_ENGINE_ARGS
    extra_args: Sequence[str] = ()
    log_path: Path | None = None
    start_timeout: float = 600.0
    startup_path: str = "explicit"
    extra_env: dict[str, str] = field(default_factory=dict)
    listen: str = "127.0.0.1:0"
    vllm_serve: Sequence[str] | None = None
    #: explicit path: also start the embedded default's embeddings engine (a second, pooling
    #: engine of the same model: :func:`embedded_embeddings_engine`)
    embeddings: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    started_in_s: float | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _tmp: Path | None = None
    # every pid seen in the adapter's process tree once it served: a process that dies before
    # stop (a killed engine core) still gets its shared-memory files removed
    _seen_pids: set[int] = field(default_factory=set)
    # and the /dev/shm files that tree held once it served (processes.stop_process_group)
    _seen_shm: set[Path] = field(default_factory=set)

    @property
    def address(self) -> str:
        address: str = self.info["address"]  # the ready file's, written by our own adapter
        return address

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def command(self, ready: Path) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of the chosen start-up path."""

        env = {
            k: v for k, v in engine_environment(self.python).items() if not k.startswith(ENV_PREFIX)
        }
        if self.startup_path == "explicit":
            cmd = [
                self.python,
                "-m",
                "vllm_nnrp_adapter.cli",
                "serve",
                "--model",
                str(self.model_dir),
                *self.engine_args,
                "--nnrp-listen",
                self.listen,
                "--nnrp-ready-file",
                str(ready),
                *(["--nnrp-embeddings-engine", embedded_embeddings_engine(self.model_dir)]
                  if self.embeddings else []),
                *self.extra_args,
            ]
        elif self.embeddings:
            raise ValueError("an embeddings engine is started by the explicit path only")
        elif self.startup_path == "vllm-plugin":
            server = (["-m", vllm_api_server_module(self.python), "--model"]
                      if self.vllm_serve is None
                      else [*self.vllm_serve, "serve"])
            cmd = [
                self.python,
                *server,
                str(self.model_dir),
                *self.engine_args,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--middleware",
                MIDDLEWARE,
                *self.extra_args,
            ]
            env[ENV_LISTEN] = self.listen
            env[ENV_PREFIX + "READY_FILE"] = str(ready)
        else:
            raise ValueError(f"startup_path must be one of {STARTUP_PATHS}")
        env.update(self.extra_env)
        # vLLM's front end and engine core talk over ZMQ IPC sockets in VLLM_RPC_BASE_PATH
        # (default: /tmp); a killed engine leaves them behind. Ours go in our own folder.
        env.setdefault("VLLM_RPC_BASE_PATH", str(self._rpc_dir()))
        return cmd, env

    def _rpc_dir(self) -> Path:
        assert self._tmp is not None, "start() makes the folder"
        path = self._tmp / "rpc"
        path.mkdir(exist_ok=True)
        return path

    def start(self) -> AdapterProcess:
        self._tmp = Path(tempfile.mkdtemp(prefix="vllm-nnrp-"))
        ready = self._tmp / "ready.json"
        log_path = self.log_path or self._tmp / "adapter.log"
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd, env = self.command(ready)
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            self._proc = start_process_group(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        try:
            self.info = self._await_ready(ready, t0, self.start_timeout, "the adapter")
        except ConformanceSetupError:
            if self._proc.poll() is None:  # timed out: what started is ours to stop
                self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        self._remember_tree()
        return self

    def _await_ready(self, ready: Path, since: float, timeout: float,
                     what: str) -> dict[str, Any]:
        """Wait for the ready file ``ready`` and read it; a ConformanceSetupError naming
        ``what`` when the process exits, or ``timeout`` seconds from ``since`` pass, first."""
        assert self._proc is not None and self.log_path is not None, "start() sets both"
        while not ready.is_file():
            if self._proc.poll() is not None:
                raise ConformanceSetupError(
                    f"{what} exited with {self._proc.returncode} before serving; "
                    f"last lines of {self.log_path}:\n{_tail(self.log_path)}"
                )
            if time.monotonic() - since > timeout:
                raise ConformanceSetupError(
                    f"{what} did not serve within {timeout:.0f} s; "
                    f"see {self.log_path}:\n{_tail(self.log_path)}"
                )
            time.sleep(0.2)
        time.sleep(0.05)  # the ready file is written in one call, but be safe on slow disks
        info: dict[str, Any] = json.loads(ready.read_text(encoding="utf-8"))
        return info

    def _remember_tree(self) -> None:
        """Note the processes the adapter runs now and the shared memory they hold, for the
        clean-up at stop (a process may die before then)."""
        assert self._proc is not None
        self._seen_pids.update(process_tree(self._proc.pid))
        self._seen_shm.update(shm_files_in_use(self._seen_pids))

    def api_server_infos(self, count: int, timeout: float = 120.0) -> list[dict[str, Any]]:
        """The start-up information of each of ``count`` API servers (``--api-server-count``,
        data parallel), from their ready files (:func:`.scaleout.path_for_rank`), waiting for
        the ones not yet serving (``timeout`` for all of them)."""
        assert self._tmp is not None and self._proc is not None, "start() first"
        since = time.monotonic()
        infos = [self._await_ready(path_for_rank(self._tmp / "ready.json", rank), since,
                                   timeout, f"API server {rank} of {count}")
                 for rank in range(count)]
        self._remember_tree()
        return infos

    def rss_bytes(self) -> int:
        """Resident memory of the adapter and every process it started (the engine core)."""
        if not self._proc:
            return 0
        return sum(proc_cpu.rss_bytes(pid) or 0 for pid in process_tree(self._proc.pid))

    def listeners(self) -> dict[int, set[int]]:
        """Listening TCP ports of the adapter and every process it started, by pid."""
        if not self._proc:
            return {}
        return {pid: listening_tcp_ports(pid) for pid in process_tree(self._proc.pid)}

    def engine_core_pid(self) -> int:
        """The pid of vLLM's engine-core process under the adapter (for fault tests)."""
        if not self._proc:
            raise ConformanceSetupError("the adapter is not running")
        for pid in process_tree(self._proc.pid):
            with contextlib.suppress(OSError):
                if b"EngineCore" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
                if "EngineCor" in Path(f"/proc/{pid}/comm").read_text():
                    return pid
        raise ConformanceSetupError("no vLLM engine-core process under the adapter")

    def stop(self, timeout: float = 60.0) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        code = stop_process_group(proc, timeout, known_pids=self._seen_pids,
                                  known_shm=self._seen_shm)
        if self._tmp is not None:
            (self._tmp / "ready.json").unlink(missing_ok=True)
            shutil.rmtree(self._tmp / "rpc", ignore_errors=True)  # vLLM's ZMQ sockets
            if self.log_path is None or self._tmp not in self.log_path.parents:
                # nothing of the caller's is left in it (a default log stays, to be read)
                shutil.rmtree(self._tmp, ignore_errors=True)
        return code

    def __enter__(self) -> AdapterProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


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
_PACKAGED_LIMITED_LINE_MANIFEST = Path(__file__).with_name("manifest.vllm-0.18.json")


def manifest_for_vllm(version: str, *, embeddings: bool = False) -> Path:
    """The manifest a suite run against the adapter on vLLM ``version`` uses: with
    ``embeddings`` (the adapter runs an embeddings engine, ``--nnrp-embeddings-engine``) the
    adapter's own; without, the same less ``embeddings.create``, by the rule the capability
    document follows (:func:`.profile.capability_document`), written once under the cache."""
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
