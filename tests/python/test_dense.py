"""Dense-layer inference through a live server, against a NumPy float64 reference of the same
stack (dense_util.reference) on fresh random inputs (seed printed by the ``rng`` fixture).

Tolerances (relative l2): float32 without TF32 1e-5, with TF32 1e-3, bfloat16/float16 1e-2;
a result with a NaN or inf never passes. Every model a test loads is unloaded afterwards.
"""

import concurrent.futures
import os
import threading
import uuid

import grpc
import numpy as np
import pytest

import gpucompute
from rpc_util import expect_rpc_error
from conftest import client_of_server
from dense_util import (ACTIVATION_FNS, TOLERANCES, check, random_layer, random_stack, reference,
                        upload_chunk, upload_header)
from gpucompute.v1 import compute_pb2, tensor_pb2

ACTIVATIONS = sorted(ACTIVATION_FNS)
# (model dtype, allow_tf32, tolerance key)
PRECISIONS = [("float32", False, "float32"), ("float32", True, "tf32"),
              ("bfloat16", False, "bfloat16"), ("float16", False, "float16")]
PRECISION_IDS = ["float32", "tf32", "bfloat16", "float16"]
OUT_DTYPES = {"float32": np.float32, "bfloat16": np.float32, "float16": np.float16}


def _unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Models:
    """Loads models under unique names on one client and unloads them all at the end."""

    def __init__(self, client):
        self.client = client
        self.names = []

    def load(self, layers, dtype="float32", allow_tf32=False, prefix="t", **kwargs):
        name = _unique(prefix)
        info = self.client.load_model(name, layers, dtype=dtype, allow_tf32=allow_tf32,
                                      **kwargs)
        self.names.append(name)
        return name, info

    def unload_all(self):
        for name in self.names:
            try:
                self.client.unload_model(name)
            except grpc.RpcError:
                pass


@pytest.fixture
def models(client):
    m = Models(client)
    yield m
    m.unload_all()




def _run_and_check(client, name, layers, x, dtype, tol_key, what=""):
    y = client.dense(name, x)
    assert y.dtype == OUT_DTYPES[dtype], f"{what}: output dtype {y.dtype} for a {dtype} model"
    return check(y, reference(layers, x), TOLERANCES[tol_key], what)


# ---------------------------------------------------------------------- accuracy

@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dtype,allow_tf32,tol_key", PRECISIONS, ids=PRECISION_IDS)
def test_one_layer(client, models, rng, dtype, allow_tf32, tol_key, activation):
    layers = [random_layer(rng, 96, 160, activation=activation, layernorm=True)]
    name, info = models.load(layers, dtype, allow_tf32)
    assert info["dtype"] == dtype and info["allow_tf32"] == allow_tf32
    rows = int(rng.integers(1, 50))
    x = rng.standard_normal((rows, 96))
    err = _run_and_check(client, name, layers, x, dtype, tol_key, f"{dtype} {activation}")
    print(f"{dtype} tf32={allow_tf32} {activation}: {rows} rows, rel l2 {err:.2e}")


def _stack(rng, which):
    """Two three-layer stacks that between them have every activation, LayerNorm plain, with
    gamma/beta and eps, and off, layers with and without bias. Three layers keep the rounding
    of half-precision and TF32 models well inside their tolerances (errors grow with depth)."""
    if which == "a":
        return [
            random_layer(rng, 72, 200, activation="gelu_tanh", layernorm=True, gamma_beta=True,
                         eps=1e-6),
            random_layer(rng, 200, 131, activation="silu", layernorm=True),
            random_layer(rng, 131, 17, activation="none", layernorm=False),
        ]
    return [
        random_layer(rng, 72, 96, activation="relu", layernorm=False),
        random_layer(rng, 96, 33, activation="gelu_erf", layernorm=True, gamma_beta=True,
                     bias=False),
        random_layer(rng, 33, 17, activation="none", layernorm=False),
    ]


@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("dtype,allow_tf32,tol_key", PRECISIONS, ids=PRECISION_IDS)
def test_stack_with_mixed_layers(client, models, rng, dtype, allow_tf32, tol_key, which):
    layers = _stack(rng, which)
    name, info = models.load(layers, dtype, allow_tf32)
    shapes = [(l["weight"].shape[0], l["weight"].shape[1]) for l in layers]
    assert [(l["in_features"], l["out_features"]) for l in info["layers"]] == shapes
    assert [l["layernorm"] for l in info["layers"]] == [bool(l.get("layernorm")) for l in layers]
    assert [l["activation"] for l in info["layers"]] == [l["activation"] for l in layers]
    if which == "a":
        assert info["layers"][0]["eps"] == pytest.approx(1e-6)
        assert info["layers"][1]["eps"] == pytest.approx(1e-5)
    # One row (the server's one-row kernels) is sent as four one-row requests and checked
    # together: the last layer has 17 outputs, and a relative l2 error over 17 values is
    # ill-conditioned (1.04e-2 for bf16 at GPUCOMPUTE_TEST_SEED=7970227693344910351).
    x = rng.standard_normal((4, 72)) * 3.0 + 0.5
    y = np.vstack([client.dense(name, x[i:i + 1]) for i in range(4)])
    err = check(y, reference(layers, x), TOLERANCES[tol_key], "4 one-row requests")
    print(f"{dtype} tf32={allow_tf32}: stack {which}, 4 x 1 row, rel l2 {err:.2e}")
    for rows in (int(rng.integers(4, 20)), int(rng.integers(60, 300))):
        x = rng.standard_normal((rows, 72)) * 3.0 + 0.5
        err = _run_and_check(client, name, layers, x, dtype, tol_key, f"{rows} rows")
        print(f"{dtype} tf32={allow_tf32}: stack {which}, {rows} rows, rel l2 {err:.2e}")


@pytest.mark.parametrize("n_in,n_out,rows", [
    (1, 1, 1), (1, 7, 3), (5, 1, 2), (2, 3, 1), (17, 1, 9), (255, 257, 31), (513, 127, 1),
    (1024, 96, 65)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_odd_sizes(client, models, rng, dtype, n_in, n_out, rows):
    # LayerNorm of one feature is beta (or 0), and of two features +-(1, -1) for every row:
    # skip it there. (With two, every output is +-(w_1j - w_2j) + b_j: a handful of distinct
    # values, some near zero by cancellation, so the bf16 rounding of the weights alone could
    # exceed the 1e-2 relative l2 tolerance: 1.13e-2 in one CI run, GPUCOMPUTE_TEST_SEED=
    # 5741861869018179411.)
    layers = [random_layer(rng, n_in, n_out, activation="gelu_tanh", layernorm=n_in > 2)]
    name, _ = models.load(layers, dtype)
    # A relative l2 error over a handful of outputs is ill-conditioned (one output near zero
    # by cancellation makes any rounding look huge): check at least 64 outputs.
    rows = max(rows, -(-64 // n_out))
    x = rng.standard_normal((rows, n_in))
    _run_and_check(client, name, layers, x, dtype, dtype, f"{n_in}->{n_out}, {rows} rows")


@pytest.mark.parametrize("in_dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_input_dtypes(client, models, rng, dtype, in_dtype):
    layers = random_stack(rng, [48, 80, 24], ["gelu_tanh", "none"], [True, False])
    name, _ = models.load(layers, dtype)
    x = rng.standard_normal((int(rng.integers(1, 40)), 48)).astype(in_dtype)
    # The reference sees exactly the values sent (float16 inputs are already rounded).
    _run_and_check(client, name, layers, x, dtype, dtype, f"{np.dtype(in_dtype).name} input")


def test_weights_in_any_float_dtype(client, models, rng):
    """float64 and float16 weights are converted on load; the reference uses the sent values."""
    layers = random_stack(rng, [40, 56, 12], ["silu", "none"], [True, False],
                          dtype=np.float64)
    layers[1]["weight"] = layers[1]["weight"].astype(np.float16)
    name, _ = models.load(layers, "float32")
    _run_and_check(client, name, layers, rng.standard_normal((9, 40)), "float32", "float32")


@pytest.mark.parametrize("offset", [4.0, 20.0])
@pytest.mark.parametrize("dtype,allow_tf32,tol_key", PRECISIONS, ids=PRECISION_IDS)
def test_layernorm_of_rows_with_a_large_mean(client, models, rng, dtype, allow_tf32, tol_key,
                                             offset):
    """Rows far from zero mean: LayerNorm must remove the offset without losing the rest
    (as it would, e.g., folding the mean into the product's epilogue in low precision)."""
    layers = random_stack(rng, [256, 384, 64], ["gelu_tanh", "none"], [True, True],
                          gamma_beta=True)
    name, _ = models.load(layers, dtype, allow_tf32)
    for rows in (1, int(rng.integers(2, 9)), int(rng.integers(40, 200))):
        x = (offset + rng.standard_normal((rows, 256))).astype(np.float32)  # sent as it is
        err = _run_and_check(client, name, layers, x, dtype, tol_key,
                             f"offset {offset}, {rows} rows")
        print(f"{dtype} tf32={allow_tf32}: offset {offset}, {rows} rows, rel l2 {err:.2e}")


def test_one_dimensional_input(client, models, rng):
    layers = random_stack(rng, [30, 20, 10], ["relu", "gelu_erf"], [True, True])
    name, _ = models.load(layers, "float32")
    x = rng.standard_normal(30)
    y = client.dense(name, x)
    assert y.shape == (10,)
    check(y, reference(layers, x), TOLERANCES["float32"], "1-D input")


def test_large_inner_dimension(client, models, rng):
    layers = [random_layer(rng, 2048, 384, activation="gelu_tanh", layernorm=True)]
    for dtype in ("float32", "bfloat16"):
        name, _ = models.load(layers, dtype)
        x = rng.standard_normal((int(rng.integers(20, 80)), 2048))
        _run_and_check(client, name, layers, x, dtype, dtype, f"K=2048 {dtype}")


# ---------------------------------------------------------------------- loading

def test_upload_in_many_chunks(client, models, rng):
    """Chunks that split elements (4097 bytes), and a model above gRPC's 4 MiB message size."""
    layers = random_stack(rng, [64, 96, 32], ["gelu_tanh", "none"], [True, False])
    layers[0]["layernorm"] = {"gamma": 1 + 0.1 * rng.standard_normal(64).astype(np.float32),
                              "beta": 0.1 * rng.standard_normal(64).astype(np.float32)}
    name, _ = models.load(layers, "float32", chunk_bytes=4097)
    _run_and_check(client, name, layers, rng.standard_normal((7, 64)), "float32", "float32")

    big = [random_layer(rng, 1024, 1536, activation="relu", layernorm=True)]  # 6 MiB of weight
    name, info = models.load(big, "float32")
    assert info["device_bytes"] >= 1024 * 1536 * 4
    _run_and_check(client, name, big, rng.standard_normal((3, 1024)), "float32", "float32")


def test_list_models(client, models, rng):
    layers = random_stack(rng, [10, 20, 5], ["gelu_tanh", "none"], [True, False])
    name, info = models.load(layers, "bfloat16")
    assert info["name"] == name and info["dtype"] == "bfloat16"
    assert info["device_bytes"] > 0
    listed = {m["name"]: m for m in client.list_models()}
    assert name in listed
    m = listed[name]
    assert m["dtype"] == "bfloat16" and m["device_bytes"] == info["device_bytes"]
    assert m["layers"] == [
        {"in_features": 10, "out_features": 20, "layernorm": True,
         "eps": pytest.approx(1e-5), "activation": "gelu_tanh"},
        {"in_features": 20, "out_features": 5, "layernorm": False,
         "eps": m["layers"][1]["eps"], "activation": "none"}]
    client.unload_model(name)
    assert name not in {m["name"] for m in client.list_models()}
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: client.dense(name, np.ones(10)))
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: client.unload_model(name))
    # The name is free again.
    models.names.remove(name)
    client.load_model(name, layers, dtype="float32")
    models.names.append(name)
    _run_and_check(client, name, layers, rng.standard_normal((2, 10)), "float32", "float32")


def test_server_info_reports_dense(client):
    info = client.server_info()
    limits = info["denseLimits"]
    assert limits["maxModels"] > 0 and limits["maxLayers"] > 0
    assert limits["maxModelBytes"] > 0 and limits["maxRowsPerRequest"] > 0
    assert "denseBatching" in info


# ---------------------------------------------------------------------- bad input

@pytest.fixture
def good(client, models, rng):
    """A loaded model and a check that it still serves: call good() after each bad input."""
    layers = random_stack(rng, [24, 40, 8], ["gelu_tanh", "none"], [True, False])
    name, _ = models.load(layers, "float32", prefix="good")

    def still_serving():
        x = rng.standard_normal((int(rng.integers(1, 10)), 24))
        _run_and_check(client, name, layers, x, "float32", "float32", "after bad input")

    still_serving.name = name
    still_serving.layers = layers
    return still_serving


def test_unknown_model(client, good):
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: client.dense(_unique("nope"), np.ones((2, 24))))
    good()


@pytest.mark.parametrize("cols", [23, 25, 1, 40])
def test_wrong_feature_count(client, good, cols):
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.dense(good.name, np.ones((3, cols))),
            rf"(?s)(\b{cols}\b.*\b24\b|\b24\b.*\b{cols}\b)")
    good()


@pytest.mark.parametrize("np_dtype,wire", [("<i4", tensor_pb2.INT32), ("<i8", tensor_pb2.INT64),
                                           ("u1", tensor_pb2.UINT8)])
def test_integer_input_is_rejected(client, good, np_dtype, wire):
    x = np.ones((2, 24), dtype=np_dtype)
    request = compute_pb2.DenseRequest(model=good.name, input=tensor_pb2.Tensor(
        dtype=wire, shape=[2, 24], data=x.tobytes()))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.stub.Dense(request, timeout=30))
    good()


@pytest.mark.parametrize("case", ["rank3", "rank1", "short_data", "no_dtype"])
def test_malformed_input_tensor(client, good, case):
    x = np.ones((2, 24), dtype="<f4")
    tensor = tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT32, shape=[2, 24], data=x.tobytes())
    if case == "rank3":
        tensor.ClearField("shape")
        tensor.shape.extend([1, 2, 24])
    elif case == "rank1":
        tensor.ClearField("shape")
        tensor.shape.extend([48])
    elif case == "short_data":
        tensor.data = x.tobytes()[:-4]
    else:
        tensor.dtype = tensor_pb2.DTYPE_UNSPECIFIED
    request = compute_pb2.DenseRequest(model=good.name, input=tensor)
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.stub.Dense(request, timeout=30))
    good()


def test_layer_shape_mismatch_at_load(client, good, rng):
    name = _unique("mismatch")
    layers = [random_layer(rng, 16, 32), random_layer(rng, 31, 8)]
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.load_model(name, layers),
            r"layers\[1\]")
    assert name not in {m["name"] for m in client.list_models()}  # nothing half-loaded
    good()


@pytest.mark.parametrize("case", ["bias", "gamma", "beta", "weight_rank", "eps", "no_layers",
                                  "name"])
def test_bad_model_is_rejected(client, good, rng, case):
    name = _unique("bad")
    layer = random_layer(rng, 16, 12, layernorm=True)
    if case == "bias":
        layer["bias"] = np.ones(11, np.float32)
    elif case in ("gamma", "beta"):
        layer["layernorm"] = {case: np.ones(15, np.float32)}
    elif case == "weight_rank":
        layer["weight"] = np.ones(16 * 12, np.float32)
    elif case == "eps":
        layer["layernorm"] = {"eps": -1.0}
    layers = [] if case == "no_layers" else [layer]
    if case == "name":
        name = "bad name/with spaces"
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.load_model(name, layers))
    assert name not in {m["name"] for m in client.list_models()}
    good()


def test_duplicate_name(client, good, rng):
    layers = [random_layer(rng, 24, 4)]
    expect_rpc_error(grpc.StatusCode.ALREADY_EXISTS, lambda: client.load_model(good.name, layers))
    good()  # still the original model (24 -> 40 -> 8)


def _raw_load(client, messages):
    return client.stub.LoadModel(iter(messages), timeout=30)


@pytest.mark.parametrize("case", ["missing_bytes", "extra_bytes", "gap", "header_twice",
                                  "chunk_first", "no_header", "bad_layer"])
def test_malformed_upload_stream(client, good, case):
    name = _unique("stream")
    w = np.arange(12, dtype="<f4").tobytes()
    messages = {
        "missing_bytes": [upload_header(name), upload_chunk(0, w[:40])],
        "extra_bytes": [upload_header(name), upload_chunk(0, w), upload_chunk(48, b"\0\0\0\0")],
        "gap": [upload_header(name), upload_chunk(0, w[:16]), upload_chunk(20, w[20:])],
        "header_twice": [upload_header(name), upload_chunk(0, w), upload_header(name)],
        "chunk_first": [upload_chunk(0, w), upload_header(name)],
        "no_header": [],
        "bad_layer": [upload_header(name), upload_chunk(0, w), upload_chunk(0, w, layer=1)],
    }[case]
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: _raw_load(client, messages))
    assert name not in {m["name"] for m in client.list_models()}
    good()


def test_raw_upload_stream(client, models, rng):
    """The wire protocol by hand: one weight in three uneven chunks."""
    name = _unique("raw")
    w = rng.standard_normal((4, 3)).astype("<f4")
    data = w.tobytes()
    info = _raw_load(client, [upload_header(name), upload_chunk(0, data[:5]), upload_chunk(5, data[5:30]),
                              upload_chunk(30, data[30:])])
    models.names.append(name)
    assert info.name == name and info.layers[0].in_features == 4
    x = rng.standard_normal((2, 4))
    check(client.dense(name, x), x @ w.astype(np.float64), TOLERANCES["float32"], "raw")


# ---------------------------------------------------------------------- concurrency

BATCHING_FLAGS = ("--dense_max_queue_delay_us=20000", "--dense_max_batch_size=128",
                  "--dense_max_batch_rows=8192")


@pytest.fixture(scope="module")
def batching_client(tmp_path_factory):
    """A client of a server that waits up to 20 ms to fill a dense batch (unless
    GPUCOMPUTE_TARGET names a running server: then that one)."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        with gpucompute.Client(os.environ["GPUCOMPUTE_TARGET"], timeout=120.0) as c:
            yield c
        return
    with client_of_server(tmp_path_factory.mktemp("batching"), *BATCHING_FLAGS, timeout=120.0) as c:
        yield c


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_128_concurrent_callers(batching_client, rng, dtype):
    client = batching_client
    layers = random_stack(rng, [64, 128, 48], ["gelu_tanh", "silu"], [True, True])
    name = _unique("concurrent")
    client.load_model(name, layers, dtype=dtype)
    try:
        before = client.server_info()["denseBatching"]
        callers = 128
        row_counts = [1 + i % 40 for i in range(callers)]
        rng.shuffle(row_counts)
        inputs = [rng.standard_normal((r, 64)) for r in row_counts]
        barrier = threading.Barrier(callers)
        batch_sizes = [0] * callers

        def call(i):
            barrier.wait()
            y = client.dense(name, inputs[i])
            batch_sizes[i] = client.last_timings.get("batch_requests", 0)
            return y

        with concurrent.futures.ThreadPoolExecutor(max_workers=callers) as pool:
            results = list(pool.map(call, range(callers)))
        for i, y in enumerate(results):
            check(y, reference(layers, inputs[i]), TOLERANCES[dtype],
                  f"caller {i} ({row_counts[i]} rows)")
        after = client.server_info()["denseBatching"]
        print(f"{dtype}: dense batching before {before}, after {after}; "
              f"largest batch seen by a caller {max(batch_sizes)}")
        assert after["requests"] - before["requests"] >= callers
        assert after["largestBatch"] > 1, after
        if any(batch_sizes):  # the server reports x-gpucompute-batch-requests
            assert max(batch_sizes) > 1, batch_sizes
        assert after["batches"] - before["batches"] < callers, (before, after)
    finally:
        client.unload_model(name)
