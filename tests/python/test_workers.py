"""Worker mode (--workers, docs/server.md "Worker mode"): the front proxies every call to worker
processes, one per GPU (here CPU-backend workers). What only this mode has: calls spread over
the workers, handles that name their worker, models on every worker, and a worker that dies
(as after a sticky CUDA error) failing only its own calls while the others keep serving and the
front starts it again. The whole client suite also runs against a worker-mode server
(CTest python_client_workers)."""

import os
import signal
import threading
import time
import urllib.request

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import STARTUP_TIMEOUT_S, metric, run_server, wait_until
from dense_util import upload_chunk, upload_header
from gpucompute.v1 import compute_pb2_grpc
from series_util import assert_power_close, astropy_power

WORKERS = 2


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    """(client, target, metrics port) of a server with two workers."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    tmp = tmp_path_factory.mktemp("workers")
    metrics_file = tmp / "metrics_port"
    with run_server(tmp, f"--workers={WORKERS}", "--cpu_threads=1", "--metrics_port=0",
                    f"--metrics_port_file={metrics_file}", "--allow_shared_memory") as target:
        with gpucompute.Client(target, timeout=60.0) as c:
            c.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            yield c, target, int(metrics_file.read_text())


def workers(client):
    return client.server_info()["workers"]


def wait_until_all_serve(client, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ws = workers(client)
        if len(ws) == WORKERS and all(w["state"] == "serving" for w in ws):
            return ws
        time.sleep(0.05)
    pytest.fail(f"workers not all serving after {timeout} s: {workers(client)}")


def series(rng, n=300):
    t = np.sort(rng.uniform(0, 50, n))
    y = np.sin(2 * np.pi * 0.3 * t) + 0.2 * rng.standard_normal(n)
    return t, y


def test_server_info_lists_the_workers(front):
    client, _, _ = front
    ws = wait_until_all_serve(client)
    assert [w["index"] for w in ws] == list(range(WORKERS))
    assert all(int(w["pid"]) > 0 for w in ws)
    assert len({w["pid"] for w in ws}) == WORKERS


def at_once(call, n=32):
    """``call()`` on ``n`` threads at once (so that the front spreads the calls over the
    workers): their results, once every one succeeded."""
    results, errors = [], []

    def run():
        try:
            results.append(call())
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return results


def test_calls_spread_over_the_workers_and_match_astropy(front, rng):
    client, _, metrics_port = front
    before = {w: scrape_worker(metrics_port, w) for w in range(WORKERS)}
    f = np.linspace(0.05, 1.0, 400)

    def call():
        t, y = series(np.random.default_rng(rng.integers(1 << 62)))
        return client.lombscargle(t, y, frequency=f)[1], astropy_power(t, y, None, f)

    for ours, ref in at_once(call):
        assert_power_close(ours, ref, rtol_of_max=1e-9)
    after = {w: scrape_worker(metrics_port, w) for w in range(WORKERS)}
    served = [after[w] - before[w] for w in range(WORKERS)]
    assert sum(served) == 32 and all(n > 0 for n in served), served


def test_process_families_of_the_front_and_each_worker(front):
    """Each process's process_* samples, labelled worker="front" or the worker's index, in one
    family each."""
    _, _, metrics_port = front
    for worker in ["front", *map(str, range(WORKERS))]:
        assert metric(metrics_port, f'process_resident_memory_bytes{{worker="{worker}"}}') > 10e6
        assert metric(metrics_port, f'process_open_fds{{worker="{worker}"}}') >= 3
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    assert text.count("# TYPE process_cpu_seconds_total counter") == 1


def scrape_worker(metrics_port, worker):
    """Periodograms worker `worker` has answered (its series, merged by the front)."""
    return metric(metrics_port, f'gpucompute_request_success_total{{worker="{worker}",op="periodogram"}}', 0.0)


def test_shared_memory_registers_on_every_worker_with_one_proof(front, rng):
    """The proof comes from one worker and the registration reaches all of them: they share the
    front's secret, so every worker maps the region, and calls on either read it."""
    client, _, metrics_port = front
    region = client.create_shared_memory(1 << 20)
    try:
        a = rng.normal(0, 1, 1000)
        x = region.put(a)

        def echoes():
            return [metric(metrics_port, f'gpucompute_request_success_total{{worker="{w}",op="echo"}}', 0.0)
                    for w in range(WORKERS)]

        before = echoes()
        for got in at_once(lambda: client.echo(x)):
            np.testing.assert_array_equal(got, a)
        after = echoes()
        assert all(n > m for n, m in zip(after, before)), (before, after)
    finally:
        client.unregister_shared_memory(region)
        region.close()


def test_handles_name_their_worker_and_calls_follow_them(front, rng):
    client, _, _ = front
    x = rng.standard_normal((5, 7)).astype(np.float32)
    handle = client.put_tensor(x)
    assert handle.handle[0] == "w" and handle.handle[1:].split("-")[0].isdigit(), handle
    # Used as an input: the call goes to the worker that holds it (any other answers NOT_FOUND).
    for _ in range(6):
        np.testing.assert_array_equal(client.echo(handle), x)
    np.testing.assert_array_equal(client.get_tensor(handle), x)
    listed = [t["handle"] for t in client.list_tensors()]
    assert handle.handle in listed
    client.delete_tensor(handle)
    assert handle.handle not in [t["handle"] for t in client.list_tensors()]


def test_tensors_of_two_workers_in_one_request_are_refused(front, rng):
    client, _, _ = front
    handle = client.put_tensor(rng.standard_normal(4).astype(np.float32))
    owner = int(handle.handle[1:].split("-")[0])
    other = f"w{(owner + 1) % WORKERS}-{'0' * 32}"
    t = gpucompute.TensorHandle(handle=other, dtype=handle.dtype, shape=handle.shape, nbytes=handle.nbytes)
    with pytest.raises(grpc.RpcError) as e:
        client.lombscargle(handle, t, frequency=np.array([0.1, 0.2]))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "different workers" in e.value.details()
    client.delete_tensor(handle)


def test_models_load_on_every_worker(front, rng):
    client, _, _ = front
    w = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    client.load_model("every-worker", [dict(weight=w, bias=b, layernorm=False, activation="relu")],
                      dtype="float32")
    try:
        assert [m["name"] for m in client.list_models()].count("every-worker") == 1
        x = rng.standard_normal((3, 6)).astype(np.float32)
        for _ in range(8):  # least-loaded routing visits both workers
            np.testing.assert_allclose(client.dense("every-worker", x), np.maximum(x @ w + b, 0),
                                       rtol=1e-5, atol=1e-6)
    finally:
        client.unload_model("every-worker")
    assert "every-worker" not in [m["name"] for m in client.list_models()]
    with pytest.raises(grpc.RpcError) as e:
        client.dense("every-worker", np.zeros((1, 6), np.float32))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_malformed_uploads_racing_the_workers_replies_leave_the_front_serving(front, rng):
    """LoadModel streams that the workers refuse part-way, from several threads at once: each
    worker's early INVALID_ARGUMENT races the front's forwarding of the rest of the stream and
    its WritesDone to the other worker (the front once freed an upstream call while it still
    had a WritesDone to start on it, and crashed)."""
    client, target, _ = front
    w = np.arange(12, dtype="<f4").tobytes()
    codes = {}
    lock = threading.Lock()
    stop = time.monotonic() + 4.0

    def sender(i):
        with grpc.insecure_channel(target) as channel:
            stub = compute_pb2_grpc.ComputeStub(channel)
            n = 0
            while time.monotonic() < stop:
                n += 1
                name = f"race-{i}-{n}"
                head = upload_header(name)
                for messages in ([head, upload_chunk(0, w[:16]), upload_chunk(20, w[20:])],
                                 [head, upload_chunk(0, w), upload_chunk(48, b"\0\0\0\0")],
                                 [head, upload_chunk(0, w[:40])]):
                    try:
                        stub.LoadModel(iter(messages), timeout=30)
                        code = grpc.StatusCode.OK
                    except grpc.RpcError as e:
                        code = e.code()
                    with lock:
                        codes[code] = codes.get(code, 0) + 1

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert set(codes) == {grpc.StatusCode.INVALID_ARGUMENT}, codes
    assert not [m for m in client.list_models() if m["name"].startswith("race-")]
    assert [x["restarts"] for x in wait_until_all_serve(client)] == [0] * WORKERS
    np.testing.assert_array_equal(client.echo(np.arange(3.0)), np.arange(3.0))


def test_a_dead_worker_fails_only_its_calls_and_is_started_again(front, rng):
    client, target, metrics_port = front
    ws = wait_until_all_serve(client)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    client.load_model("survivor", [dict(weight=w, bias=np.zeros(3, np.float32), layernorm=False,
                                        activation="none")], dtype="float32")
    victim = ws[1]
    restarts = victim["restarts"]
    # A long call on each worker: the victim's fails UNAVAILABLE naming it; the other's succeeds.
    t, y = series(rng, 4000)
    f = np.linspace(0.01, 2.0, 100_000)
    outcomes = []

    def slow():
        try:
            client.lombscargle(t, y, frequency=f)
            outcomes.append("OK")
        except grpc.RpcError as e:
            outcomes.append((e.code(), e.details()))

    def in_flight():  # per worker, from /metrics (scraping it routes no call to a worker)
        return [metric(metrics_port, f'gpucompute_worker_calls_in_flight{{worker="{i}"}}', 0.0)
                for i in range(WORKERS)]

    # One call, then the other once the first is routed: least-loaded routing sends it to the
    # other worker. (Polling ServerInfo meanwhile would not do: it is a call to every worker,
    # and its counts, taken worker by worker, could tip the second call onto the busy one.)
    threads = [threading.Thread(target=slow) for _ in range(2)]
    for n, th in enumerate(threads):
        th.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(v >= 1 for v in in_flight()) < n + 1:
            time.sleep(0.01)
    assert all(v >= 1 for v in in_flight()), in_flight()
    os.kill(int(victim["pid"]), signal.SIGKILL)  # what a sticky CUDA error does to a worker
    # A crash is seen when its connection drops (a device fault earlier: the worker's health
    # turns NOT_SERVING first); from then on the other worker serves every call, and health
    # stays SERVING.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and workers(client)[1]["state"] == "serving":
        time.sleep(0.005)
    assert gpucompute.health(target) == "SERVING"
    x = rng.standard_normal((2, 4)).astype(np.float32)
    for _ in range(10):
        np.testing.assert_allclose(client.dense("survivor", x), x @ w, rtol=1e-5, atol=1e-6)
        assert gpucompute.health(target) == "SERVING"
    for th in threads:
        th.join()
    assert "OK" in outcomes, outcomes
    failed = [o for o in outcomes if o != "OK"]
    assert len(failed) == 1 and failed[0][0] == grpc.StatusCode.UNAVAILABLE, outcomes
    # Started again; it holds no model until one is loaded again (the other worker still does).
    ws = wait_until_all_serve(client)
    assert ws[1]["restarts"] == restarts + 1 and ws[1]["pid"] != victim["pid"]
    restarts_metric = metric(metrics_port, f'gpucompute_worker_restarts_total{{worker="{victim["index"]}"}}', 0.0)
    assert restarts_metric == restarts + 1
    for _ in range(6):
        np.testing.assert_allclose(client.dense("survivor", x), x @ w, rtol=1e-5, atol=1e-6)
    client.unload_model("survivor")
