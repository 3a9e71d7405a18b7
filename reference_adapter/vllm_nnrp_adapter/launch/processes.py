"""The process trees the adapter's tooling starts (an adapter and its engine core, vLLM's own
HTTP server): their start in a group of their own inside the caller's session, their pids,
their listening TCP ports, the ``/dev/shm`` files they hold, and a bounded stop of the whole
group that removes what the dead tree left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["listening_tcp_ports", "orphaned_shm", "process_tree", "remove_leftovers",
           "shm_files_in_use", "start_process_group", "stop_process_group"]


def start_process_group(cmd: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start ``cmd`` as the leader of a new process group in the caller's session.

    The group is what :func:`stop_process_group` ends, so nothing the child starts (vLLM's
    engine core) outlives it. It is never a new *session*: with the kernel's autogroup
    scheduling each session is a task group of its own, and a vLLM engine in a second task
    group starved every process outside it for up to 33 s at a time on this project's 2-vCPU
    machines (docs/vllm-cpu.md#machine-stalls). ``popen`` is passed to :class:`subprocess.Popen`.
    """
    if popen.get("start_new_session") or "preexec_fn" in popen:
        raise ValueError("start_process_group keeps the child in the caller's session")
    return subprocess.Popen(list(cmd), process_group=0, **popen)

def stop_process_group(
    proc: subprocess.Popen[Any],
    timeout: float = 60.0,
    *,
    known_pids: Iterable[int] = (),
    known_shm: Iterable[Path] = (),
) -> int | None:
    """SIGTERM a child started by :func:`start_process_group`, then end what is left of its group.

    The group is ours (the child leads it), so nothing it started, such as vLLM's engine core,
    outlives it. Then the shared-memory files of the stopped processes go
    (:func:`remove_leftovers`): those of the tree as it is now, of ``known_pids`` (processes
    seen earlier that may have died before: a killed engine core), and ``known_shm``, files the
    tree held when it was seen earlier (a killed engine core's ``psm_*`` segment, 160 MiB, is
    named after no pid and held by nobody once it is dead).
    """
    pids = set(known_pids) | set(process_tree(proc.pid))
    shm = shm_files_in_use(pids) | set(known_shm)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    remove_leftovers(sorted(pids), shm)
    return proc.returncode


def remove_leftovers(pids: Sequence[int], shm: Iterable[Path] = ()) -> list[Path]:
    """Remove the shared-memory files our stopped processes registered and could not remove.

    The Intel OpenMP runtime (preloaded for vLLM's CPU worker) registers each process as
    ``/dev/shm/__KMP_REGISTERED_LIB_<pid>_<n>`` and removes it only at a clean exit; a
    killed engine core leaves it. vLLM's engine core and worker share a ring buffer and
    semaphores (``psm_*``, ``sem.mp-*``) that a killed process leaves too; those are the
    ``shm`` files our processes had open before they were stopped (:func:`shm_files_in_use`).
    Only files named after our own stopped pids, or that our processes had open and no live
    process holds any more, go.
    """
    removed = []
    for pid in pids:
        for path in Path("/dev/shm").glob(f"__KMP_REGISTERED_LIB_{pid}_*"):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    for path in sorted(orphaned_shm(path for path in shm if path.exists())):
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


def orphaned_shm(paths: Iterable[Path]) -> set[Path]:
    """Those of ``paths`` that no live process holds open or mapped, and that are no OpenMP
    registration of a live process (``__KMP_REGISTERED_LIB_<pid>_*``: a live process removes
    its own at exit)."""
    paths = set(paths)
    if not paths:
        return set()
    held = shm_files_in_use(int(e) for e in os.listdir("/proc") if e.isdigit())
    out = set()
    for path in paths - held:
        if path.name.startswith("__KMP_REGISTERED_LIB_"):
            pid = path.name.removeprefix("__KMP_REGISTERED_LIB_").split("_")[0]
            if pid.isdigit() and Path(f"/proc/{pid}").exists():
                continue
        out.add(path)
    return out


def shm_files_in_use(pids: Iterable[int]) -> set[Path]:
    """The ``/dev/shm`` files processes ``pids`` hold open or mapped (unlinked ones left out)."""
    out: set[Path] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("/dev/shm/") and not target.endswith(" (deleted)"):
                        out.add(Path(target))
        with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                at = line.find("/dev/shm/")
                if at >= 0 and not line.rstrip().endswith("(deleted)"):
                    out.add(Path(line[at:].rstrip()))
    return out


def listening_tcp_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its socket inodes matched in /proc/net)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # local_address is HEXIP:HEXPORT; st 0A is LISTEN; the inode is column 10
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it, read from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out
