"""The Submit stream and Echo through a real server: results of every operation equal the unary
calls', results come back out of order, a failing job gets its own error and the stream goes
on, the server bounds the jobs in flight per stream, cancelling the stream cancels its queued
jobs, and Echo returns what it was given."""

import os
import time

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import backend, client_of_server
from gpucompute import assimilation
from gpucompute.v1 import compute_pb2, tensor_pb2
from rpc_util import expect_rpc_error

# A periodogram that takes a while on the backend under test (pairs = samples x frequencies).
# Direct sums of this many sample-frequency pairs take tens of milliseconds a request.
SLOW_PAIRS = 20_000_000_000 if backend() != "cpu" else 60_000_000


def periodogram_request(rng, n=200, frequencies=500, dtype=tensor_pb2.FLOAT64):
    t = np.sort(rng.uniform(0, 100, n))
    y = np.sin(2 * np.pi * 0.3 * t) + rng.normal(0, 0.5, n)
    return compute_pb2.PeriodogramRequest(
        series=[compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y))],
        frequency=compute_pb2.FrequencyGrid(
            uniform=compute_pb2.UniformGrid(f0=0.01, df=0.002, n=frequencies)),
        dtype=dtype)


def slow_request(rng):
    # Direct: the fast method (what auto takes on so fine a grid) is quick on a GPU, and the
    # small output keeps the time in the computation, not in the reply.
    n = 100_000 if backend() != "cpu" else 1000
    r = periodogram_request(rng, n=n, frequencies=SLOW_PAIRS // n)
    r.method = compute_pb2.PERIODOGRAM_METHOD_DIRECT
    return r


def echo_request(payload):
    return compute_pb2.EchoRequest(tensor=tensor_pb2.Tensor(
        dtype=tensor_pb2.UINT8, shape=[len(payload)], data=payload))


def collect(s):
    return {r.id: r for r in s.results()}


def test_every_operation_matches_its_unary_call(client, rng):
    name = f"stream-{os.getpid()}-{rng.integers(1 << 30)}"
    w = rng.normal(0, 0.1, (16, 8)).astype(np.float32)
    client.load_model(name, [{"weight": w, "activation": "gelu_tanh", "layernorm": True}],
                      dtype="float32")
    try:
        x = rng.normal(size=(5, 16)).astype(np.float32)
        X, HX = rng.normal(size=(12, 6)), rng.normal(size=(4, 6))
        y, r = rng.normal(size=4), np.full(4, 0.5)
        pg = periodogram_request(rng)
        dense = compute_pb2.DenseRequest(model=name, input=gpucompute.to_tensor(x))
        assim = compute_pb2.AssimilateRequest(
            problems=[assimilation.problem_from_item(dict(X=X, HX=HX, y=y, obs_error=r))])
        payload = rng.bytes(1000)
        with client.stream() as s:
            s.submit("pg", pg)
            s.submit("dense", dense)
            s.submit("assim", assim)
            s.submit("echo", echo_request(payload))
            s.close()
            got = collect(s)
        assert sorted(got) == ["assim", "dense", "echo", "pg"]
        for r_ in got.values():
            assert r_.ok, (r_.id, r_.code, r_.message)
            assert r_.timing["total_us"] >= 0
        assert got["pg"].response == client.stub.Periodogram(pg)
        assert got["dense"].response == client.stub.Dense(dense)
        assert got["assim"].response == client.stub.Assimilate(assim)
        assert got["echo"].response.tensor.data == payload
        assert got["pg"].timing["batch_requests"] >= 1
    finally:
        client.unload_model(name)


def test_results_come_back_as_they_finish(client, rng):
    with client.stream() as s:
        s.submit("slow", slow_request(rng))
        s.submit("fast", echo_request(b"x" * 100))
        s.close()
        order = [r.id for r in s.results()]
    assert order == ["fast", "slow"]


def test_a_failing_job_gets_its_own_error_and_the_stream_goes_on(client, rng):
    bad = periodogram_request(rng)
    bad.series[0].y.shape[0] += 1                         # data no longer matches the shape
    unknown_model = compute_pb2.DenseRequest(model="no-such-model",
                                             input=gpucompute.to_tensor(np.zeros((1, 4))))
    with client.stream() as s:
        s.submit("bad", bad)
        s.submit("missing", unknown_model)
        s.submit("empty", compute_pb2.EchoRequest())      # no tensor payload
        for i in range(5):
            s.submit(f"good{i}", periodogram_request(rng))
        s.close()
        got = collect(s)
    assert got["bad"].code == grpc.StatusCode.INVALID_ARGUMENT
    assert "series[0].y" in got["bad"].message, got["bad"].message
    assert got["bad"].response is None
    assert got["missing"].code == grpc.StatusCode.NOT_FOUND
    assert "no-such-model" in got["missing"].message
    assert got["empty"].code == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensor" in got["empty"].message
    assert all(got[f"good{i}"].ok for i in range(5))


def test_a_job_timeout_is_its_own_deadline(client, rng):
    with client.stream() as s:
        s.submit("slow", slow_request(rng))
        s.submit("late", periodogram_request(rng), timeout=1e-6)
        s.submit("fine", periodogram_request(rng), timeout=60)
        s.close()
        got = collect(s)
    assert got["late"].code == grpc.StatusCode.DEADLINE_EXCEEDED, got["late"]
    assert got["fine"].ok and got["slow"].ok


def test_the_server_bounds_the_jobs_in_flight_per_stream(tmp_path, rng):
    with client_of_server(tmp_path, "--stream_max_jobs_in_flight=2") as c:
        assert c.server_info()["streamLimits"]["maxJobsInFlight"] == 2
        jobs = 12
        with c.stream() as s:
            for i in range(jobs):
                s.submit(str(i), slow_request(rng) if i % 3 == 0 else periodogram_request(rng))
            s.close()
            got = collect(s)
        assert sorted(got, key=int) == [str(i) for i in range(jobs)]
        assert all(r.ok for r in got.values())
        batching = c.server_info()["periodogramBatching"]
        # Never more than two of the stream's jobs queued at once, so no batch can hold more.
        assert batching["requests"] == jobs
        assert batching["largestBatch"] <= 2, batching


def test_cancelling_the_stream_cancels_its_queued_jobs(tmp_path, rng):
    # One request per launch, so that jobs queue behind the running one and can be cancelled.
    with client_of_server(tmp_path, "--max_batch_size=1") as c:
        jobs = 20
        s = c.stream()
        for i in range(jobs):
            s.submit(str(i), slow_request(rng))
        results = s.results()
        first = next(results)
        assert first.ok
        s.cancel()
        with pytest.raises(grpc.RpcError) as e:
            for _ in results:
                pass
        assert e.value.code() == grpc.StatusCode.CANCELLED
        # The server drops what was queued; it never runs all of them.
        deadline = time.monotonic() + 60
        while True:
            b = c.server_info()["periodogramBatching"]
            if b["expiredBeforeDispatch"] > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert b["expiredBeforeDispatch"] > 0, b
        assert b["requests"] < jobs, b
        # ... and serves the next stream.
        with c.stream() as s2:
            s2.submit("after", periodogram_request(rng))
            s2.close()
            assert [r.ok for r in s2.results()] == [True]


def test_submitting_nothing_finishes_the_stream(client):
    with client.stream() as s:
        s.close()
        assert list(s.results()) == []


def test_a_job_without_an_operation_is_invalid(client):
    s = client.stream()
    s._requests.put(compute_pb2.SubmitRequest(id="empty"))   # what other languages can send
    s.close()
    (r,) = list(s.results())
    assert r.id == "empty" and r.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "job" in r.message


def test_echo_returns_the_same_bytes(client, rng):
    for size in (0, 1, 4097, 3 << 20):
        payload = rng.bytes(size)
        assert client.echo(payload) == payload
    a = rng.normal(size=(7, 3))
    np.testing.assert_array_equal(client.echo(a), a)
    assert client.echo(a, discard=True) is None
    assert "total_us" in client.last_timings


def test_echo_rejects_a_tensor_whose_bytes_do_not_match(client):
    bad = compute_pb2.EchoRequest(tensor=tensor_pb2.Tensor(
        dtype=tensor_pb2.FLOAT32, shape=[3], data=b"12345"))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.stub.Echo(bad),
                     r"tensor\.data: holds 5 bytes")
    assert client.echo(b"next") == b"next"
