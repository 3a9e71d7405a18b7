"""The hot-path profile's thread readings: /proc of this very process (a named busy thread is
found with its CPU and switches), pools grouped by name without digits, a Python thread's own
name preferred over ``comm``, and a thread born between two readings counted from zero."""

from __future__ import annotations

import os
import threading

import pytest

from vllm_nnrp_adapter.benchmark.hotpath.threads import (
    ThreadReading,
    per_token_by_pool,
    pool_name,
    pool_table,
    read_threads,
)


def test_this_process_threads_are_read_with_cpu_and_switches() -> None:
    stop = threading.Event()
    seen: dict[str, int] = {}

    def spin() -> None:
        seen["tid"] = threading.get_native_id()
        x = 0
        while not stop.is_set():
            x += 1

    t = threading.Thread(target=spin, name="spinner")
    t.start()
    try:
        stop.wait(0.3)
        readings = read_threads(os.getpid())
    finally:
        stop.set()
        t.join()
    assert os.getpid() in readings  # the main thread's tid is the pid
    spinner = readings[seen["tid"]]
    assert spinner.cpu_s > 0 and spinner.voluntary + spinner.involuntary >= 0
    assert read_threads(2**22 + 12345) == {}  # no such process: nothing, never a raise


def test_pools_group_by_name_without_digits_and_count_new_threads_from_zero() -> None:
    assert pool_name("ZMQbg/IO/0") == pool_name("ZMQbg/IO/1") == "ZMQbg/IO/N"
    before = {1: ThreadReading("python", 1.0, 10, 1, 0), 2: ThreadReading("ZMQbg/IO/0", 0.5, 5, 0, 0)}
    after = {
        1: ThreadReading("python", 1.5, 30, 1, 1000),
        2: ThreadReading("ZMQbg/IO/0", 0.6, 15, 0, 0),
        3: ThreadReading("ZMQbg/IO/1", 0.1, 10, 2, 0),  # born in between
    }
    pools = per_token_by_pool(before, after, 100, {1: "MainThread"})
    assert list(pools) == ["MainThread", "ZMQbg/IO/N"]  # largest CPU first, py-spy's name
    main = pools["MainThread"]
    assert main["cpu_us"] == pytest.approx(5000.0) and main["vol"] == pytest.approx(0.2)
    assert main["runq_us"] == pytest.approx(0.01)
    zmq = pools["ZMQbg/IO/N"]
    assert zmq["threads"] == 2 and zmq["cpu_us"] == pytest.approx(2000.0)
    assert zmq["invol"] == pytest.approx(0.02)
    assert "| MainThread | 1 | 5000 |" in pool_table(pools)
