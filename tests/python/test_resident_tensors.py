"""Resident tensors and shared memory through the Python client and a real server: each
operation with inputs by handle and in shared memory and outputs kept or in shared memory gives
exactly the inline result; dense chaining; put/get round trips (parallel, ranges); quotas,
expiry, owners, bad references; shared memory off by default."""

import os

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import client_of_server, wait_until
from gpucompute.v1 import compute_pb2, tensor_pb2
from rpc_util import expect_rpc_error

INPUTS = ["inline", "handle", "shm"]
OUTPUTS = [None, "keep", "shm"]
CASES = [(i, o) for i in INPUTS for o in OUTPUTS if (i, o) != ("inline", None)]


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    """A client of a server with shared memory allowed, and a registered 64 MiB region."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    with client_of_server(tmp_path_factory.mktemp("tensors"), "--allow_shared_memory") as c:
        region = c.create_shared_memory(64 << 20, "py")
        c.region = region
        yield c
        c.unregister_shared_memory()
        region.close()


def _as(c, kind, array):
    """The array as an input of `kind`: itself, a handle, or a copy in the region."""
    if kind == "handle":
        return c.put_tensor(array)
    if kind == "shm":
        return c.region.put(array)
    return array


def _out(c, kind):
    # Outputs go to the region's upper half, inputs to the lower.
    return (c.region, 32 << 20) if kind == "shm" else kind


def _fetch(c, value):
    """An output back as a NumPy array (copied: shared-memory views change with the region)."""
    if isinstance(value, gpucompute.TensorHandle):
        return c.get_tensor(value)
    return np.array(value, copy=True)


@pytest.mark.parametrize("inputs,outputs", CASES)
def test_periodogram(tc, rng, inputs, outputs):
    tc.region.reset()
    series = []
    for n in (40, 77):
        t = np.sort(rng.uniform(0, 50, n))
        y = np.sin(2 * np.pi * 0.4 * t) + rng.normal(0, 0.3, n)
        dy = rng.uniform(0.5, 1.0, n)
        series.append((t, y, dy))
    grid = gpucompute.UniformGrid(0.01, 0.005, 400)
    want = tc.periodogram(series, grid)
    got = tc.periodogram([tuple(_as(tc, inputs, a) for a in s) for s in series], grid,
                         output=_out(tc, outputs))
    for g, w in zip(got, want):
        if outputs == "keep":
            assert isinstance(g.power, gpucompute.TensorHandle)
        np.testing.assert_array_equal(_fetch(tc, g.power), w.power)
        np.testing.assert_array_equal(g.frequency, w.frequency)
        assert (g.peak_index, g.peak_power) == (w.peak_index, w.peak_power)


@pytest.fixture(scope="module")
def mlp(tc):
    rng = np.random.default_rng(1)
    layers = [{"weight": rng.normal(0, 0.2, (12, 20)).astype(np.float32), "layernorm": True,
               "activation": "gelu_tanh"},
              {"weight": rng.normal(0, 0.2, (20, 12)).astype(np.float32),
               "bias": rng.normal(0, 1, 12).astype(np.float32)}]
    name = f"tensors-{os.getpid()}"
    tc.load_model(name, layers, dtype="float32")
    yield name
    tc.unload_model(name)


@pytest.mark.parametrize("inputs,outputs", CASES)
def test_dense(tc, mlp, rng, inputs, outputs):
    tc.region.reset()
    x = rng.normal(0, 1, (33, 12)).astype(np.float32)
    want = tc.dense(mlp, x)
    got = tc.dense(mlp, _as(tc, inputs, x), output=_out(tc, outputs))
    np.testing.assert_array_equal(_fetch(tc, got), want)


def test_dense_chained_on_the_server(tc, mlp, rng):
    x = rng.normal(0, 1, (21, 12)).astype(np.float32)
    want = tc.dense(mlp, tc.dense(mlp, tc.dense(mlp, x)))
    h = tc.put_tensor(x)
    k1 = tc.dense(mlp, h, output="keep")
    k2 = tc.dense(mlp, k1, output="keep")
    assert isinstance(k2, gpucompute.TensorHandle) and k2.shape == (21, 12)
    np.testing.assert_array_equal(tc.dense(mlp, k2), want)
    for handle in (h, k1, k2):
        tc.delete_tensor(handle)


@pytest.mark.parametrize("inputs,outputs", CASES)
def test_assimilate(tc, rng, inputs, outputs):
    tc.region.reset()
    n, m, N = 10, 6, 7
    X, HX = rng.normal(0, 1, (n, N)), rng.normal(0, 1, (m, N))
    y, r = rng.normal(0, 1, m), rng.uniform(0.5, 1.5, m)
    E = rng.normal(0, 0.5, (m, N))
    problems = [dict(X=X, HX=HX, y=y, obs_error=r, method="etkf", inflation=1.05),
                dict(X=X, HX=HX, y=y, obs_error=np.diag(r), method="enkf", perturbations=E)]
    want = tc.assimilate_batch(problems, return_diagnostics=True)
    placed = [{k: (_as(tc, inputs, v) if isinstance(v, np.ndarray) else v) for k, v in p.items()}
              for p in problems]
    got = tc.assimilate_batch(placed, return_diagnostics=True, output=_out(tc, outputs))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_fetch(tc, g.analysis), w.analysis)
        np.testing.assert_array_equal(_fetch(tc, g.innovation_mean), w.innovation_mean)
        assert g.analysis_spread == w.analysis_spread


@pytest.mark.parametrize("inputs,outputs", CASES)
def test_echo(tc, rng, inputs, outputs):
    tc.region.reset()
    a = rng.normal(0, 1, (17, 5, 3))
    got = tc.echo(_as(tc, inputs, a), output=_out(tc, outputs))
    np.testing.assert_array_equal(_fetch(tc, got), a)


def test_stream_jobs_use_handles(tc, rng):
    a = rng.integers(0, 255, 1000, dtype=np.uint8)
    h = tc.put_tensor(a)
    with tc.stream() as s:
        s.submit("keep", compute_pb2.EchoRequest(
            tensor=gpucompute.to_tensor(h),
            output_placement=tensor_pb2.OutputPlacement(keep=True)))
        s.close()
        (r,) = list(s.results())
    assert r.ok, r.message
    np.testing.assert_array_equal(tc.get_tensor(r.response.tensor.handle), a)


def test_put_get_roundtrip(tc, rng):
    for dtype in ("float64", "float32", "float16", "int32", "int64", "uint8"):
        a = (rng.normal(0, 100, (3, 4, 5))).astype(dtype)
        h = tc.put_tensor(a)
        assert (h.shape, h.nbytes, h.dtype_name) == ((3, 4, 5), a.nbytes, dtype)
        b = tc.get_tensor(h)
        assert b.dtype == a.dtype
        np.testing.assert_array_equal(b, a)
        tc.delete_tensor(h)


def test_parallel_put_and_ranges(tc, rng):
    a = rng.integers(0, 1 << 31, 300_001, dtype=np.int64)
    raw = a.tobytes()
    for streams in (1, 3, 8):
        h = tc.put_tensor(a, chunk_bytes=50_000, streams=streams)
        np.testing.assert_array_equal(tc.get_tensor(h), a)
        np.testing.assert_array_equal(tc.get_tensor(h, streams=streams), a)
        for offset, length, chunk in [(0, 1, 0), (8, 0, 4096), (12345, 67890, 1000),
                                      (len(raw), 0, 0)]:
            for get_streams in (1, 4):
                got = tc.get_tensor_bytes(h, offset, length, chunk_bytes=chunk,
                                          streams=get_streams)
                assert got == raw[offset:offset + length if length else None], (
                    offset, length, chunk, get_streams)
        expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                         lambda: tc.get_tensor_bytes(h, 8, len(raw)), r"length")
        tc.delete_tensor(h)
    expect_rpc_error(grpc.StatusCode.NOT_FOUND,
                     lambda: tc.get_tensor_bytes("no-such-handle", streams=4))


def test_create_and_write_in_parts(tc):
    a = np.arange(1000, dtype=np.float32)
    h = tc.create_tensor(a.shape, a.dtype)
    assert not tc.write_tensor(h, a[:600].tobytes())["complete"]
    expect_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, lambda: tc.echo(h), r"incomplete")
    assert tc.write_tensor(h, a[600:].tobytes(), offset=2400)["complete"]
    np.testing.assert_array_equal(tc.echo(h), a)
    expect_rpc_error(grpc.StatusCode.FAILED_PRECONDITION,
                     lambda: tc.write_tensor(h, b"\0\0\0\0"), r"complete")
    tc.delete_tensor(h)


def test_list_and_delete(tc):
    before = {t["handle"] for t in tc.list_tensors()}
    h = tc.put_tensor(np.zeros(10, dtype=np.float32))
    (info,) = [t for t in tc.list_tensors() if t["handle"] == h.handle]
    assert info["bytes"] == 40 and info["complete"] and info["shape"] == (10,)
    tc.delete_tensor(h)
    assert {t["handle"] for t in tc.list_tensors()} == before
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: tc.delete_tensor(h), r"handle")


def test_owners_are_isolated(tc):
    target = tc.target
    with gpucompute.Client(target, client_id="alice") as alice, \
            gpucompute.Client(target, client_id="bob") as bob:
        h = alice.put_tensor(np.arange(5.0))
        assert alice.list_tensors()[0]["owner"] == "alice"
        for call in (lambda: bob.get_tensor(h), lambda: bob.echo(h),
                     lambda: bob.delete_tensor(h)):
            expect_rpc_error(grpc.StatusCode.NOT_FOUND, call, r"no resident tensor")
        assert bob.list_tensors() == []
        alice.delete_tensor(h)


def test_bad_references_name_the_field(tc, mlp):
    expect_rpc_error(grpc.StatusCode.NOT_FOUND,
                     lambda: tc.dense(mlp, gpucompute.TensorHandle("nope", tensor_pb2.FLOAT32,
                                                                   (2, 12))),
                     r'input\.handle: no resident tensor "nope"')
    request = compute_pb2.AssimilateRequest(problems=[compute_pb2.AssimilationProblem(
        x=tensor_pb2.Tensor(handle="abc"))])
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: tc.stub.Assimilate(request, timeout=30),
                     r'problems\[0\]\.x\.handle: no resident tensor "abc"')
    bad_len = tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT32, shape=[2, 12],
                                shared_memory=tensor_pb2.SharedMemoryRef(region="py", length=7))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: tc.dense(mlp, bad_len), r"input\.shared_memory\.length")
    outside = tensor_pb2.Tensor(dtype=tensor_pb2.UINT8, shape=[16], shared_memory=(
        tensor_pb2.SharedMemoryRef(region="py", offset=(64 << 20) - 8, length=16)))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: tc.echo(outside),
                     r"tensor\.shared_memory\.length")
    unknown = tensor_pb2.Tensor(dtype=tensor_pb2.UINT8, shape=[1], shared_memory=(
        tensor_pb2.SharedMemoryRef(region="nope", length=1)))
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: tc.echo(unknown),
                     r"tensor\.shared_memory\.region")
    small = (tc.region, 0, 100)
    expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                     lambda: tc.echo(np.zeros(1000), output=small),
                     r"output_placement\.shared_memory\.length")
    np.testing.assert_array_equal(tc.echo(np.ones(3)), np.ones(3))  # still serving


def test_registering_keeps_what_the_region_holds(tc, rng):
    """The proof goes at the start of the region only for the registration call: data put there
    before registering is intact after, and the server reads it."""
    with gpucompute.SharedMemoryRegion(4096) as r:
        a = rng.normal(0, 1, 500)
        x = r.put(a)
        tc.register_shared_memory(r, "kept")
        try:
            np.testing.assert_array_equal(r.ndarray((500,), np.float64), a)
            np.testing.assert_array_equal(tc.echo(x), a)
        finally:
            tc.unregister_shared_memory(r)
        with pytest.raises(ValueError, match="cannot hold"):
            with gpucompute.SharedMemoryRegion(40) as tiny:
                tc.register_shared_memory(tiny, "tiny")


def test_register_errors(tc):
    with gpucompute.SharedMemoryRegion(4096) as r:
        expect_rpc_error(grpc.StatusCode.ALREADY_EXISTS,
                         lambda: tc.register_shared_memory(r, "py"), r"name")
        expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                         lambda: tc.register_shared_memory(r, "bad/name"), r"name")
    def proof(key):
        return tc.stub.SharedMemoryProof(compute_pb2.SharedMemoryProofRequest(key=key),
                                         timeout=30).proof

    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: tc.stub.RegisterSharedMemory(
        compute_pb2.RegisterSharedMemoryRequest(name="x", key="/gpucompute-missing",
                                                byte_size=64, proof=proof("/gpucompute-missing")),
        timeout=30), r"key")
    p = proof(tc.region.key)
    covered = bytes(tc.region.buf[:len(p)])
    tc.region.buf[:len(p)] = p  # the proof found, then the range is checked
    try:
        expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: tc.stub.RegisterSharedMemory(
            compute_pb2.RegisterSharedMemoryRequest(name="x", key=tc.region.key,
                                                    byte_size=(64 << 20) + 1, proof=p),
            timeout=30), r"outside the object")
    finally:
        tc.region.buf[:len(p)] = covered
    # Registering an object without writing the proof into it (as a caller who cannot write
    # another process's object would): refused.
    expect_rpc_error(grpc.StatusCode.PERMISSION_DENIED, lambda: tc.stub.RegisterSharedMemory(
        compute_pb2.RegisterSharedMemoryRequest(name="x", key=tc.region.key, byte_size=64),
        timeout=30), r"proof: missing")
    expect_rpc_error(grpc.StatusCode.PERMISSION_DENIED, lambda: tc.stub.RegisterSharedMemory(
        compute_pb2.RegisterSharedMemoryRequest(name="x", key=tc.region.key, byte_size=64,
                                                proof=proof(tc.region.key)), timeout=30),
        r"does not start with it")


def test_server_info(tc):
    info = tc.server_info()
    assert info["sharedMemoryEnabled"] is True
    limits = info["tensorLimits"]
    assert limits["maxBytesPerClient"] == 8 << 30
    assert limits["maxTensorsPerClient"] == 1024
    assert limits["idleExpiryMs"] == 600_000


def test_quotas_and_defaults(tmp_path):
    """A server with small quotas; shared memory left off."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    with client_of_server(tmp_path, "--tensor_quota_bytes=10000", "--tensor_quota_count=3") as c:
        expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         lambda: c.put_tensor(np.zeros(10001, np.uint8)), r"--tensor_quota_bytes")
        handles = [c.put_tensor(np.zeros(10, np.uint8)) for _ in range(3)]
        expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         lambda: c.put_tensor(np.zeros(1, np.uint8)), r"--tensor_quota_count")
        expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         lambda: c.echo(np.zeros(1), output="keep"), r"output_placement\.keep")
        np.testing.assert_array_equal(c.echo(np.ones(2)), np.ones(2))  # the next is served
        c.delete_tensor(handles[0])
        assert c.put_tensor(np.zeros(10, np.uint8)).nbytes == 10  # the quota is free again
        assert c.server_info()["sharedMemoryEnabled"] is False
        with gpucompute.SharedMemoryRegion(4096) as r:
            expect_rpc_error(grpc.StatusCode.FAILED_PRECONDITION,
                             lambda: c.register_shared_memory(r, "r"), r"--allow_shared_memory")


def test_idle_tensors_expire(tmp_path):
    """--tensor_idle_expiry_s: a tensor nobody uses goes, and frees its quota."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    with client_of_server(tmp_path, "--tensor_quota_count=1", "--tensor_idle_expiry_s=0.5") as c:
        handle = c.put_tensor(np.zeros(10, np.uint8))
        wait_until(lambda: c.list_tensors() == [], "the idle tensor to expire")
        expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: c.get_tensor(handle))
        assert c.put_tensor(np.zeros(10, np.uint8)).nbytes == 10  # the quota is free again


def test_large_shared_memory_inputs_are_copied_and_checked_in_blocks(tc, rng):
    """A shared-memory input over 16 MiB is copied into the region on several threads and by
    the server in blocks that it checks for NaN and infinities as it copies: an echo returns
    every byte, and a non-finite value anywhere (first block, a middle one, the last element)
    is still INVALID_ARGUMENT naming its place."""
    tc.region.reset()
    a = rng.normal(0, 1, (17 << 20) // 8 + 3)  # not a whole number of pieces or blocks
    np.testing.assert_array_equal(tc.echo(tc.region.put(a)), a)
    n, N, m = 2100, 1100, 5  # X is 18.5 MB
    X = rng.normal(0, 1, (n, N))
    HX, y, r = rng.normal(0, 1, (m, N)), rng.normal(0, 1, m), np.ones(m)
    for at, bad in (((0, 3), np.nan), ((1000, 7), np.inf), ((n - 1, N - 1), -np.inf)):
        tc.region.reset()
        Xb = X.copy()
        Xb[at] = bad
        with pytest.raises(grpc.RpcError) as e:
            tc.assimilate(tc.region.put(Xb), HX, y, r)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"x[{at[0]}, {at[1]}] is" in e.value.details()
    tc.region.reset()
    Xa = tc.assimilate(tc.region.put(X), HX, y, r)
    np.testing.assert_allclose(Xa, tc.assimilate(X, HX, y, r), rtol=0, atol=0)
