"""SIGTERM under load loses no accepted request.

A server is loaded by unary callers and a Submit stream; SIGTERM arrives mid-load. Every call
the server had accepted must finish OK with its own correct result; calls made after the
signal may only be refused with UNAVAILABLE; the server must exit 0. Runs on whatever backend
the suite uses (CPU in CI, CUDA on the GPU machine).
"""
import os
import signal
import subprocess
import threading
import time

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import _server_binary, backend

CALLERS = 12


def _start(tmp):
    port_file = tmp / "port"
    proc = subprocess.Popen([_server_binary(), "--address=127.0.0.1:0", f"--port_file={port_file}",
                             f"--backend={backend()}", f"--kernel_cache_dir={tmp / 'kc'}",
                             "--shutdown_grace_s=30"],
                            stdout=open(tmp / "server.log", "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return proc, f"127.0.0.1:{port_file.read_text().strip()}"
        assert proc.poll() is None, (tmp / "server.log").read_text()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("server did not start")


def _series(rng):
    t = np.sort(rng.uniform(0, 50, 800))
    f0 = rng.uniform(0.2, 0.8)
    return t, np.sin(2 * np.pi * f0 * t) + 0.05 * rng.standard_normal(t.size), f0


def test_sigterm_under_load_loses_no_accepted_request(tmp_path):
    proc, target = _start(tmp_path)
    client = gpucompute.Client(target, timeout=60)
    grid = gpucompute.UniformGrid(0.05, 0.0005, 4000)
    stop = threading.Event()
    outcomes = []  # (sent_at, code, correct)
    lock = threading.Lock()

    def caller(seed):
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            t, y, f0 = _series(rng)
            sent = time.monotonic()
            try:
                result = client.periodogram([(t, y)], frequency=grid, timeout=60)[0]
                # Its own result: the peak sits at its own frequency.
                code, correct = "OK", abs(result.peak_frequency - f0) < 0.002
            except grpc.RpcError as e:
                code, correct = e.code().name, True
            with lock:
                outcomes.append((sent, code, correct))
            if code != "OK":
                time.sleep(0.05)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    for th in threads:
        th.start()
    # A Submit stream with jobs in flight when the signal comes; it half-closes after sending.
    rng = np.random.default_rng(99)
    stream = client.stream(timeout=60)
    stream_jobs = {}
    time.sleep(1.5)
    for i in range(32):
        t, y, f0 = _series(rng)
        stream.submit(i, gpucompute.client.compute_pb2.PeriodogramRequest(
            series=[gpucompute.client.compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y))],
            frequency=gpucompute.grids.frequency_grid_proto(grid)[0]))
        stream_jobs[str(i)] = f0
    stream.close()
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stream_results = {r.id: r for r in stream.results()}
    time.sleep(2.0)
    stop.set()
    for th in threads:
        th.join(60)
    exit_code = proc.wait(timeout=60)
    client.close()

    assert exit_code == 0, (tmp_path / "server.log").read_text()[-3000:]
    codes = {}
    for _, code, _ in outcomes:
        codes[code] = codes.get(code, 0) + 1
    assert set(codes) <= {"OK", "UNAVAILABLE"}, codes
    assert all(correct for _, _, correct in outcomes), "a caller got another caller's result"
    before = [o for o in outcomes if o[0] < signalled - 0.5]
    assert before and all(code == "OK" for _, code, _ in before), codes
    # Every job the stream sent before the signal was read and answered, correctly.
    assert set(stream_results) == set(stream_jobs), sorted(stream_results)
    for job_id, r in stream_results.items():
        assert r.ok, (job_id, r)
        assert abs(r.response.results[0].peak_frequency - stream_jobs[job_id]) < 0.002
