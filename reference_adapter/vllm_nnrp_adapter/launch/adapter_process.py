"""The adapter in a child process, by either start-up path (``vllm-nnrp serve``, or vLLM's own
API server with the plugin), on an ephemeral loopback port: started in its own process group,
ready when its ready file says so, and stopped with its whole tree, shared-memory files
included. :class:`AdapterProcess` is what ``vllm-nnrp conformance``, the benchmarks, the
real-vLLM tests and the evidence regeneration start the adapter through.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..observability import proc_cpu
from .embedded import (
    EMBEDDED_ENGINE_ARGS,
    ConformanceSetupError,
    embedded_embeddings_engine,
    engine_environment,
    vllm_api_server_module,
)
from .processes import (
    listening_tcp_ports,
    process_tree,
    shm_files_in_use,
    start_process_group,
    stop_process_group,
)
from .scaleout import path_for_rank
from .settings import ENV_LISTEN, ENV_PREFIX
from .vllm_plugin import MIDDLEWARE

__all__ = ["STARTUP_PATHS", "AdapterProcess"]

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
