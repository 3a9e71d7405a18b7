"""A release run's work on each vLLM version, and the order it is done in.

Per version (:func:`run_versions`): its environment, the tiny model, the adapter on the
explicit path (with the embeddings engine where the line offers Level 3), the full
conformance suite against it, the latency benchmarks and the e2e smoke on that same adapter,
then the suite again inside ``vllm serve`` with vLLM's own HTTP API as its twin. Versions run
in the order their environments become ready. The next version's adapter starts beside the
twin's ``vllm serve`` of the one before: start-ups only, each mostly one
process importing torch and vLLM, so the two cores share them; the twin's suite then runs
with nothing starting beside it. An adapter stops in the background while the next step runs
(vLLM's shutdown takes seconds). What measures (the
latency benchmarks, parity) never runs beside another version's work; parity
(:func:`run_parity`) starts servers of its own, after every build.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from nnrp_conformance.gate.evidence import ADAPTER_LOG, MANIFEST_FILE

from ..benchmark.parity.facts import HTTP, NNRP, NNRP_IPC, NNRP_ONE
from ..conformance.conformance import manifest_for_vllm, run_suite
from ..conformance.twin import TWIN_DIR, run_twin, twin_server
from ..launch.adapter_process import AdapterProcess
from ..launch.embedded import tiny_model, vllm_python
from ..launch.settings import default_manifest_path
from ..vllm_backend.families import limitations
from .builds import BackgroundBuild
from .record import SUITE_STEP, TWIN_STEP
from .steps import Step, console

#: what the latency benchmarks of a version whose run starts before the last environment is
#: built were measured beside (their results' ``measured_beside``)
BESIDE_BUILDS = ("the release run's background vLLM environment builds "
                 f"(nice {BackgroundBuild.NICENESS})")

#: the parity columns of ``--quick`` (the gate's ``nnrp``, its ipc twin and one shared
#: session beside HTTP); the full run measures every column, the suite's recording clients too
QUICK_PARITY_PATHS = (HTTP, NNRP, NNRP_IPC, NNRP_ONE)


def bench(python: str, name: str, args: Sequence[str]) -> int:
    """A benchmark in the interpreter that has what it needs (vLLM ones: the vLLM venv)."""
    return subprocess.call([python, "-m", "vllm_nnrp_adapter.cli", "bench", name, *args])


def suite_adapter_log(vdir: Path) -> Path:
    """The log of the adapter the suite and the latency benchmarks ran against; the parity
    benchmark's own adapter logs elsewhere (``benchmark.parity.parity.log_paths``)."""
    return vdir / ADAPTER_LOG


@dataclass
class Prepared:
    """A version whose adapter is up: what its later steps need."""

    version: str
    python: str
    model: Path
    adapter: AdapterProcess
    embeddings: bool
    #: the version's evidence folder, ``vllm-VERSION/``
    vdir: Path


def prepare(version: str, out: Path, step: Step, *, beside: str | None = None) -> Prepared | None:
    """The version's environment, tiny model and adapter (None when one failed: the step
    says why). ``beside``: run without a spinner, beside the step named."""
    vdir = out / f"vllm-{version}"
    (vdir / "bench").mkdir(parents=True, exist_ok=True)
    spinner = beside is None
    python = step(f"vLLM {version} environment", lambda: vllm_python(version),
                  spinner=spinner, beside=beside)
    if not isinstance(python, str):
        return None
    model = step(f"tiny model for vLLM {version}", lambda: tiny_model(python),
                 spinner=spinner, beside=beside)
    if not isinstance(model, Path):
        return None
    # the embeddings engine where the line can offer Level 3 (docs/levels.md#reference-adapter)
    embeddings = not limitations(version)
    adapter = AdapterProcess(python, model, log_path=suite_adapter_log(vdir),
                             embeddings=embeddings)
    started = step(f"start the adapter on vLLM {version}", lambda: adapter.start() and None,
                   spinner=spinner, beside=beside)
    if isinstance(started, Exception):
        return None
    return Prepared(version, python, model, adapter, embeddings, vdir)


def judge(ready: Prepared, *, quick: bool, step: Step, background: Executor) -> None:
    """The suite, the latency benchmarks and the smoke against the version's adapter, which
    then stops on ``background`` (vLLM's shutdown takes seconds and measures nothing)."""
    version, vdir, adapter = ready.version, ready.vdir, ready.adapter
    try:
        # the claims the adapter keeps on this vLLM line; where they are fewer than the
        # adapter's, the gate reads them from the version's own manifest.json
        manifest = manifest_for_vllm(version, embeddings=ready.embeddings)
        if manifest != default_manifest_path():
            shutil.copyfile(manifest, vdir / MANIFEST_FILE)
        step(SUITE_STEP.format(version),
             lambda: run_suite(adapter.address, manifest, vdir, ["-q"]))
        for name in ("case-results.json", "execution-plan.json"):
            if not (vdir / name).is_file():
                console.print(f"  [red]missing {vdir / name}[/red]")
        args = ["--target", adapter.address, "--out", str(vdir),
                *(["--quick"] if quick else []),
                *(["--beside", BESIDE_BUILDS] if step.beside_build() else [])]
        step(f"streaming/cancellation latency and e2e smoke on vLLM {version}",
             lambda: bench(ready.python, "vllm", args))
        facts = {
            "vllm_version": adapter.info.get("vllm_version"),
            "startup_s": round(adapter.started_in_s or 0, 1),
            "rss_bytes": adapter.rss_bytes(),
        }
        (vdir / "adapter.json").write_text(json.dumps(facts, indent=2), encoding="utf-8")
    finally:
        background.submit(adapter.stop)


def run_versions(versions: Sequence[str], out: Path, *, quick: bool, step: Step,
                 building: BackgroundBuild | None) -> None:
    """Every version's steps, in the order their environments become ready; the twin's
    server of one version and the next version's adapter start side by side (start-ups only:
    a suite never runs beside a start-up, whose load once made vLLM 0.18.1 drop a tool call's
    streamed arguments in the twin, measured cold). Adapters stop in the background; all have
    stopped when this returns."""
    pending = list(versions)
    # the next version's prepare() runs ahead here, beside the current version's twin start
    ahead: Future[Prepared | None] | None = None
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="release") as background:
        try:
            while pending or ahead is not None:
                if ahead is not None:
                    ready, ahead = ahead.result(), None
                else:
                    version = (pending[0] if building is None or not building.running
                               else step("waiting for the next vLLM environment to be built",
                                         functools.partial(building.next_ready, pending)))
                    pending.remove(version)
                    ready = prepare(version, out, step)
                if ready is None:
                    continue
                judge(ready, quick=quick, step=step, background=background)
                server = twin_server(ready.python, ready.model, ready.vdir / TWIN_DIR)
                server_title = f"start vllm serve for the HTTP twin on vLLM {ready.version}"
                following = (building.ready_now(pending) if building
                             else (pending[0] if pending else None))
                if following is not None:
                    pending.remove(following)
                    ahead = background.submit(prepare, following, out, step,
                                              beside=server_title)
                started = step(server_title, server.start)
                if ahead is not None:
                    wait([ahead])  # the twin's suite runs with nothing starting beside it
                if isinstance(started, Exception):
                    server.stop()
                    continue
                # vLLM's own HTTP API on the same engine, every request compared (twin.py)
                step(TWIN_STEP.format(ready.version),
                     functools.partial(run_twin, ready.python, ready.model, ready.version,
                                       ready.vdir / TWIN_DIR, server=server))
        finally:
            # an error ended the loop: what started ahead stops too
            if ahead is not None and ahead.exception() is None:
                left = ahead.result()
                if left is not None:
                    left.adapter.stop()


def run_parity(version: str, out: Path, *, quick: bool, step: Step) -> None:
    """The HTTP/SSE parity benchmark of ``version`` (its own two servers); never beside a
    build."""
    vdir = out / f"vllm-{version}"
    if not vdir.is_dir():
        return  # the version's environment or adapter failed: already reported
    step(f"HTTP/SSE parity on vLLM {version}",
         lambda: bench(vllm_python(version, build=False), "parity",
                       ["--vllm-version", version, "--out", str(vdir),
                        *(["--quick", "--paths", ",".join(QUICK_PARITY_PATHS)]
                          if quick else [])]))
