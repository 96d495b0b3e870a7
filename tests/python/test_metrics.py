"""The Prometheus endpoint of the server binary: --metrics_port=0 with --metrics_port_file,
a scrape with urllib before and after a few calls, and a clean SIGTERM exit with it running
(run_server checks the exit code)."""

import concurrent.futures
import math
import os
import re
import time
import urllib.request

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import STARTUP_TIMEOUT_S, run_server

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')
_TYPE = re.compile(r'^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$')


def scrape(port):
    """{series: value} of one scrape; asserts that every line is HELP, TYPE or a sample of a
    typed family."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        m = _TYPE.match(line)
        if m:
            types[m.group(1)] = m.group(2)
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a text-format line: {line!r}"
        name = m.group(1)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or types.get(family) == "histogram", f"untyped sample: {line!r}"
        # Worker mode (--workers): each worker's series carry worker="N" first; summed over
        # the workers, as `sum without (worker)` would, they read like one server's.
        labels = re.sub(r'^\{worker="\d+",?', "{", m.group(2) or "")
        key = name + ("" if labels == "{}" else labels)
        samples[key] = samples.get(key, 0.0) + float(m.group(3))
    return samples


def worker_mode():
    return "--workers" in os.environ.get("GPUCOMPUTE_SERVER_ARGS", "")


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    """(client, metrics port) of a server started with the metrics endpoint."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    tmp = tmp_path_factory.mktemp("metrics")
    port_file = tmp / "metrics_port"
    with run_server(tmp, "--metrics_port=0", f"--metrics_port_file={port_file}") as target:
        # Written before the service's port file, which run_server has waited for.
        port = int(port_file.read_text())
        assert port > 0
        with gpucompute.Client(target, timeout=60.0) as c:
            c.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            yield c, port


def test_calls_move_the_counters(metered):
    client, port = metered
    before = scrape(port)
    t = np.linspace(0.0, 20.0, 200)
    for _ in range(2):
        client.lombscargle(t, np.sin(3 * t))
    with pytest.raises(grpc.RpcError) as e:
        client.unload_model("no-such-model")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    after = scrape(port)

    def delta(series):
        return after.get(series, 0) - before.get(series, 0)

    assert delta('gpucompute_request_success_total{op="periodogram"}') == 2
    if worker_mode():  # UnloadModel goes to every worker; the front counts the call once
        assert delta('gpucompute_front_calls_total{method="unload_model",code="NOT_FOUND"}') == 1
    else:
        assert delta('gpucompute_request_failure_total{op="unload_model",code="NOT_FOUND"}') == 1
    assert delta('gpucompute_request_duration_seconds_count{op="periodogram"}') == 2
    assert delta('gpucompute_compute_duration_seconds_count{op="periodogram"}') == 2
    assert delta('gpucompute_batch_size_sum{op="periodogram"}') == 2
    assert after['gpucompute_pending_requests{op="periodogram"}'] == 0
    assert after['gpucompute_request_duration_seconds_bucket{op="periodogram",le="+Inf"}'] == \
        after['gpucompute_request_duration_seconds_count{op="periodogram"}']
    backend = client.server_info()["backend"]
    assert any(k.startswith("gpucompute_build_info{") and f'backend="{backend}"' in k
               for k in after), after.keys()
    if backend == "cuda":
        assert after['gpucompute_gpu_memory_total_bytes{gpu="0"}'] > 0
        # Each call was a batch of its own, run on some GPU.
        assert sum(delta(k) for k in after if k.startswith("gpucompute_gpu_batches_total{")) == 2
    assert not math.isnan(after["gpucompute_kernel_compile_seconds_total"])


def test_process_families(metered):
    """The standard process_* families (as every Prometheus client library exports them), on
    every backend."""
    if worker_mode():
        pytest.skip("worker mode labels each process's (test_workers.py checks them)")
    _, port = metered
    m = scrape(port)
    assert m["process_resident_memory_bytes"] > 10e6
    assert m["process_virtual_memory_bytes"] >= m["process_resident_memory_bytes"]
    assert 3 <= m["process_open_fds"] <= m["process_max_fds"]
    assert m["process_cpu_seconds_total"] > 0
    assert time.time() - 3600 < m["process_start_time_seconds"] <= time.time()


def test_work_is_spread_over_every_gpu(metered):
    """With two or more GPUs in one server, calls from many callers at once run on every one
    of them (each batch goes to the least-loaded GPU), as gpucompute_gpu_batches_total shows."""
    client, port = metered
    info = client.server_info()
    if info["backend"] != "cuda" or len(info["devices"]) < 2 or worker_mode():
        pytest.skip("needs one server process with two or more GPUs (CUDA backend)")
    before = scrape(port)
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 100, 20_000))
    y = np.sin(t) + rng.normal(0, 1, t.size)
    grid = gpucompute.UniformGrid(0.01, 1e-4, 50_000)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for frequency, power in pool.map(lambda _: client.lombscargle(t, y, frequency=grid),
                                         range(96)):
            assert len(power) == len(frequency) == 50_000
    after = scrape(port)
    for d in info["devices"]:
        series = f'gpucompute_gpu_batches_total{{gpu="{d["index"]}"}}'
        assert after[series] > before.get(series, 0), (series, after[series])
