"""SIGTERM under load loses no accepted request.

A server is loaded by unary callers and a Submit stream; SIGTERM arrives mid-load. Every call
the server had accepted must finish OK with its own correct result; calls made after the
signal may only be refused with UNAVAILABLE (or CANCELLED by gRPC core, for a call it had
received but not yet handed to a handler: grpc/grpc#41785); the server must exit 0. Open
Submit streams stop reading on SIGTERM: the jobs they had read finish and are written back, a
job read afterwards is answered UNAVAILABLE without being run, and the stream ends UNAVAILABLE
"server shutting down" well before the grace period; the client answers the jobs the server
never read with UNAVAILABLE, so that every job has exactly one result. Runs on whatever
backend the suite uses (CPU in CI, CUDA on the GPU machine).
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
from conftest import _server_binary, backend, metric, wait_until

CALLERS = 12


def _start(tmp, *flags):
    port_file = tmp / "port"
    proc = subprocess.Popen([_server_binary(), "--address=127.0.0.1:0", f"--port_file={port_file}",
                             f"--backend={backend()}", f"--kernel_cache_dir={tmp / 'kc'}",
                             "--shutdown_grace_s=30", *flags],
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
    # gRPC core ends a call it had received but not yet handed to a handler with CANCELLED
    # when the server shuts down (grpc/grpc#41785): seen under CI load for calls sent as the
    # signal came; such a call never ran. Any other call is OK or refused UNAVAILABLE, and
    # every call sent well before the signal is OK (below).
    assert set(codes) <= {"OK", "UNAVAILABLE", "CANCELLED"}, codes
    assert all(correct for _, _, correct in outcomes), "a caller got another caller's result"
    before = [o for o in outcomes if o[0] < signalled - 0.5]
    assert before and all(code == "OK" for _, code, _ in before), codes
    # Every job the stream sent has one result: its own, correct, when the server had read it
    # before the signal; else UNAVAILABLE (not run; the stream stopped reading).
    assert set(stream_results) == set(stream_jobs), sorted(stream_results)
    for job_id, r in stream_results.items():
        if r.ok:
            assert abs(r.response.results[0].peak_frequency - stream_jobs[job_id]) < 0.002
        else:
            assert r.code == grpc.StatusCode.UNAVAILABLE, (job_id, r)
            assert "server shutting down" in r.message, (job_id, r)
    assert stream.code() in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE), stream.code()


def _pairs_per_second(client, rng):
    """The backend's periodogram speed, timed on one request (a warm-up first)."""
    t, y, _ = _series(rng)
    grid = gpucompute.UniformGrid(0.05, 1e-5, 200_000)
    client.periodogram([(t, y)], frequency=grid)
    start = time.monotonic()
    client.periodogram([(t, y)], frequency=grid)
    return t.size * 200_000 / max(time.monotonic() - start, 1e-4)


@pytest.mark.skipif(backend() != "cpu", reason="holds jobs behind a CPU periodogram of seconds; "
                    "the stream's shutdown is the service layer's, the same on every backend")
def test_sigterm_finishes_open_submit_streams(tmp_path):
    """Three open streams at SIGTERM: one with IN_FLIGHT jobs read (one running, the others
    queued) and more behind them in the client, one that sends a job after the signal, and an
    idle one. Each step waits for the server to show that it got there (its metrics, its log)."""
    in_flight = 8
    # Job 0 of `busy` runs for seconds. A batch waits for company up to max_queue_delay (here
    # longer than the test) unless nothing runs, so the jobs read after job 0 stay queued until
    # it ends (or the shutdown dispatches them): at the signal the server holds exactly
    # `in_flight` of busy's jobs, and reads no more.
    mport_file = tmp_path / "mport"
    proc, target = _start(tmp_path, f"--stream_max_jobs_in_flight={in_flight}",
                          "--max_queue_delay_us=600000000", "--shutdown_grace_s=300",
                          "--metrics_port=0", f"--metrics_port_file={mport_file}")
    client = gpucompute.Client(target, timeout=60)
    rng = np.random.default_rng(7)
    slow_frequencies = min(1 << 24, max(1 << 20, int(4.0 * _pairs_per_second(client, rng) / 800)))
    pb = gpucompute.client.compute_pb2
    mport = int(mport_file.read_text())

    def periodogram_metric(name):
        return metric(mport, f'{name}{{op="periodogram"}}', 0.0)

    def job(t, y, frequencies):
        grid = gpucompute.UniformGrid(0.05, 0.8 / frequencies, frequencies)
        return pb.PeriodogramRequest(
            series=[pb.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y))],
            frequency=gpucompute.grids.frequency_grid_proto(grid)[0])

    busy, late, idle = client.stream(), client.stream(), client.stream()
    stream_results, lock = {"busy": [], "late": [], "idle": []}, threading.Lock()

    def drain(name, s):
        for r in s.results():
            with lock:
                stream_results[name].append(r)

    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("busy", busy), ("late", late), ("idle", idle))]
    for th in readers:
        th.start()
    try:
        finished = periodogram_metric("gpucompute_compute_duration_seconds_count")
        dispatched = periodogram_metric("gpucompute_queue_duration_seconds_count")
        expected = {}
        for i in range(20):
            t, y, f0 = _series(rng)
            busy.submit(i, job(t, y, slow_frequencies if i == 0 else 4000))
            expected[str(i)] = f0
            if i == 0:  # job 0 reaches the idle server and runs at once
                wait_until(lambda: periodogram_metric("gpucompute_queue_duration_seconds_count")
                           > dispatched, "job 0 to run")
        wait_until(lambda: periodogram_metric("gpucompute_pending_requests") == in_flight - 1,
                   f"{in_flight - 1} of busy's jobs to queue behind job 0")
        t, y, f_held = _series(rng)
        late.submit("held", job(t, y, 4000))  # queued with busy's: late is open at the signal
        wait_until(lambda: periodogram_metric("gpucompute_pending_requests") == in_flight,
                   "late's job to queue")
        assert periodogram_metric("gpucompute_compute_duration_seconds_count") == finished, \
            "job 0 finished before the signal: it is too short for this machine"
        with lock:
            assert stream_results["busy"] == stream_results["late"] == [], \
                "a job finished before the signal"
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "open Submit stream(s)" in (tmp_path / "server.log").read_text(),
                   "the server to log its shutdown")
        late.submit("after-signal", job(t, y, 4000))  # read while job 0 runs: not run
        for th in readers:
            th.join(150)
        exit_code = proc.wait(timeout=150)
        drained_s = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
        client.close()
    log = (tmp_path / "server.log").read_text()

    assert exit_code == 0, log[-3000:]
    assert drained_s < 120, f"the streams held the drain for {drained_s:.1f} s (grace 300 s)"
    assert "3 open Submit stream(s)" in log, log[-3000:]
    for s in (busy, late, idle):
        assert s.code() == grpc.StatusCode.UNAVAILABLE, s.code()
        assert s.details() == "server shutting down"
    # busy: the jobs it had read are answered, correctly; the others, never read, are
    # answered UNAVAILABLE by the client; one result per job.
    got = {}
    for r in stream_results["busy"]:
        assert r.id not in got, f"two results for job {r.id}"
        got[r.id] = r
    assert set(got) == set(expected)
    ran = sorted(int(i) for i, r in got.items() if r.ok)
    assert ran == list(range(in_flight)), ran
    for job_id, r in got.items():
        if r.ok:
            assert abs(r.response.results[0].peak_frequency - expected[job_id]) < 0.002
        else:
            assert r.code == grpc.StatusCode.UNAVAILABLE, r
            assert r.message == ("no result: the stream ended with UNAVAILABLE: "
                                 "server shutting down"), r.message
            assert r.response is None
    # late: the job sent after the signal was read and refused, not run.
    by_id = {r.id: r for r in stream_results["late"]}
    assert set(by_id) == {"held", "after-signal"}
    assert by_id["held"].ok
    assert abs(by_id["held"].response.results[0].peak_frequency - f_held) < 0.002
    refused = by_id["after-signal"]
    assert refused.code == grpc.StatusCode.UNAVAILABLE, refused
    assert refused.message.startswith("server shutting down: job not run"), refused.message
    # idle: nothing to answer; it ended all the same.
    assert stream_results["idle"] == []
    # A finished stream takes no more jobs.
    with pytest.raises(RuntimeError, match="UNAVAILABLE"):
        idle.submit("x", job(t, y, 10))
