"""The dense-model client calls against an in-process fake server: what load_model streams
(header first, chunks in order with offsets, sizes), how dense encodes inputs and decodes
outputs, and the dicts of list_models. No gpucompute-server needed."""

import threading

import grpc
import numpy as np
import pytest

import gpucompute
from rpc_util import fake_server
from gpucompute import models
from gpucompute.v1 import compute_pb2, compute_pb2_grpc, tensor_pb2
from dense_util import check, random_stack, reference

_TENSOR_NAMES = {
    compute_pb2.LAYER_TENSOR_WEIGHT: "weight",
    compute_pb2.LAYER_TENSOR_BIAS: "bias",
    compute_pb2.LAYER_TENSOR_GAMMA: "gamma",
    compute_pb2.LAYER_TENSOR_BETA: "beta",
}
_NUMPY = {tensor_pb2.FLOAT32: "<f4", tensor_pb2.FLOAT64: "<f8", tensor_pb2.FLOAT16: "<f2"}


def _to_bf16_bits(a):
    """float32 -> bfloat16 bits, nearest even."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


class FakeDense(compute_pb2_grpc.ComputeServicer):
    """Reassembles uploaded models and answers Dense with the float64 reference, rounded to
    the model's dtype."""

    def __init__(self):
        self.models = {}         # name -> (header, layers as reference dicts)
        self.streams = []        # every LoadModel stream, as a list of messages
        self.dense_requests = []
        self.lock = threading.Lock()

    def LoadModel(self, request_iterator, context):
        messages = list(request_iterator)
        with self.lock:
            self.streams.append(messages)
        if not messages or messages[0].WhichOneof("part") != "header":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "first message must be the header")
        header = messages[0].header
        if header.name in self.models:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"model {header.name} exists")
        data = {}
        for m in messages[1:]:
            if m.WhichOneof("part") != "chunk":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "header sent twice")
            c = m.chunk
            buf = data.setdefault((c.layer, c.tensor), bytearray())
            if c.offset != len(buf):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"chunk offset {c.offset}, expected {len(buf)}")
            buf.extend(c.data)
        layers = []
        for i, lh in enumerate(header.layers):
            def tensor(th, which):
                raw = bytes(data.pop((i, which), b""))
                return np.frombuffer(raw, dtype=_NUMPY[th.dtype]).reshape(tuple(th.shape))
            layer = {"weight": tensor(lh.weight, compute_pb2.LAYER_TENSOR_WEIGHT),
                     "activation": models._ACTIVATION_NAMES[lh.activation]}
            if lh.HasField("bias"):
                layer["bias"] = tensor(lh.bias, compute_pb2.LAYER_TENSOR_BIAS)
            if lh.HasField("layernorm"):
                ln = {"eps": lh.layernorm.eps if lh.layernorm.HasField("eps") else None}
                if lh.layernorm.HasField("gamma"):
                    ln["gamma"] = tensor(lh.layernorm.gamma, compute_pb2.LAYER_TENSOR_GAMMA)
                if lh.layernorm.HasField("beta"):
                    ln["beta"] = tensor(lh.layernorm.beta, compute_pb2.LAYER_TENSOR_BETA)
                layer["layernorm"] = ln
            layers.append(layer)
        if data:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"stray chunks {sorted(data)}")
        with self.lock:
            self.models[header.name] = (header, layers)
        return self._info(header)

    @staticmethod
    def _info(header):
        info = compute_pb2.ModelInfo(name=header.name, dtype=header.dtype or tensor_pb2.FLOAT32,
                                     allow_tf32=header.allow_tf32, device_bytes=1234,
                                     load_ms=0.5)
        for lh in header.layers:
            info.layers.add(in_features=lh.weight.shape[0], out_features=lh.weight.shape[1],
                            layernorm=lh.HasField("layernorm"),
                            eps=(lh.layernorm.eps if lh.layernorm.HasField("eps") else 1e-5)
                            if lh.HasField("layernorm") else 0.0,
                            activation=lh.activation)
        return info

    def UnloadModel(self, request, context):
        with self.lock:
            if self.models.pop(request.name, None) is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no model {request.name}")
        return compute_pb2.UnloadModelResponse()

    def ListModels(self, request, context):
        with self.lock:
            headers = [h for h, _ in self.models.values()]
        return compute_pb2.ListModelsResponse(models=[self._info(h) for h in headers])

    def Dense(self, request, context):
        with self.lock:
            self.dense_requests.append(request)
            entry = self.models.get(request.model)
        if entry is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no model {request.model}")
        header, layers = entry
        x = gpucompute.from_tensor(request.input)
        y = reference(layers, x)
        out = tensor_pb2.Tensor(dtype=header.dtype, shape=list(y.shape))
        if header.dtype == tensor_pb2.BFLOAT16:
            out.data = _to_bf16_bits(y).tobytes()
        else:
            out.data = y.astype(np.float16 if header.dtype == tensor_pb2.FLOAT16
                                else np.float32).astype(_NUMPY.get(header.dtype, "<f4")).tobytes()
        return compute_pb2.DenseResponse(output=out)


@pytest.fixture
def fake():
    servicer = FakeDense()
    with fake_server(servicer, workers=8) as c:
        yield servicer, c


def test_stream_is_header_then_ordered_chunks(fake, rng):
    servicer, client = fake
    layers = random_stack(rng, [33, 70, 5], ["gelu_tanh", "none"], [True, False],
                          gamma_beta=True, eps=1e-6)
    info = client.load_model("m", layers, dtype="float32", chunk_bytes=1000)
    stream = servicer.streams[-1]
    assert stream[0].WhichOneof("part") == "header"
    assert all(m.WhichOneof("part") == "chunk" for m in stream[1:])
    assert all(0 < len(m.chunk.data) <= 1000 for m in stream[1:])
    # Tensor by tensor, in order, offsets counting that tensor's bytes.
    seen = []
    for m in stream[1:]:
        key = (m.chunk.layer, m.chunk.tensor)
        if not seen or seen[-1][0] != key:
            assert key not in [k for k, _ in seen], f"tensor {key} sent in two runs"
            seen.append([key, 0])
        assert m.chunk.offset == seen[-1][1]
        seen[-1][1] += len(m.chunk.data)
    assert [k for k, _ in seen] == [
        (0, compute_pb2.LAYER_TENSOR_WEIGHT), (0, compute_pb2.LAYER_TENSOR_BIAS),
        (0, compute_pb2.LAYER_TENSOR_GAMMA), (0, compute_pb2.LAYER_TENSOR_BETA),
        (1, compute_pb2.LAYER_TENSOR_WEIGHT), (1, compute_pb2.LAYER_TENSOR_BIAS)]
    assert dict(seen)[(0, compute_pb2.LAYER_TENSOR_WEIGHT)] == 33 * 70 * 4
    header = stream[0].header
    assert header.name == "m" and header.dtype == tensor_pb2.FLOAT32 and not header.allow_tf32
    assert list(header.layers[0].weight.shape) == [33, 70]
    assert header.layers[0].weight.dtype == tensor_pb2.FLOAT32
    assert header.layers[0].layernorm.eps == 1e-6
    assert header.layers[0].activation == compute_pb2.ACTIVATION_GELU_TANH
    assert not header.layers[1].HasField("layernorm")
    assert info == {
        "name": "m", "dtype": "float32", "allow_tf32": False, "device_bytes": 1234,
        "load_ms": 0.5,
        "layers": [{"in_features": 33, "out_features": 70, "layernorm": True, "eps": 1e-6,
                    "activation": "gelu_tanh"},
                   {"in_features": 70, "out_features": 5, "layernorm": False, "eps": 0.0,
                    "activation": "none"}]}


def test_default_chunks_fit_the_default_message_limit(fake, rng):
    servicer, client = fake
    w = rng.standard_normal((1024, 1100)).astype(np.float32)  # 4.3 MiB: two chunks
    client.load_model("big", [{"weight": w}])
    stream = servicer.streams[-1]
    assert [len(m.chunk.data) for m in stream[1:]] == [
        models.DEFAULT_CHUNK_BYTES, w.nbytes - models.DEFAULT_CHUNK_BYTES]
    assert max(m.ByteSize() for m in stream) < 4 << 20
    assert stream[0].header.dtype == tensor_pb2.BFLOAT16  # the default model dtype


def test_arrays_travel_in_their_own_float_dtype(fake, rng):
    servicer, client = fake
    layers = [{"weight": rng.standard_normal((4, 3)),                       # float64
               "bias": rng.standard_normal(3).astype(np.float16),
               "layernorm": {"gamma": np.arange(4, dtype=np.int32)}},    # -> float32
              {"weight": [[1, 2], [3, 4], [5, 6]], "activation": "RELU"}]  # list of ints
    client.load_model("dtypes", layers, dtype="float16")
    h = servicer.streams[-1][0].header
    assert h.dtype == tensor_pb2.FLOAT16
    assert h.layers[0].weight.dtype == tensor_pb2.FLOAT64
    assert h.layers[0].bias.dtype == tensor_pb2.FLOAT16
    assert h.layers[0].layernorm.gamma.dtype == tensor_pb2.FLOAT32
    assert not h.layers[0].layernorm.HasField("beta")
    assert not h.layers[0].layernorm.HasField("eps")
    assert h.layers[1].weight.dtype == tensor_pb2.FLOAT32
    assert h.layers[1].activation == compute_pb2.ACTIVATION_RELU
    _, stored = servicer.models["dtypes"]
    np.testing.assert_array_equal(stored[0]["weight"], layers[0]["weight"])
    np.testing.assert_array_equal(stored[0]["layernorm"]["gamma"], [0, 1, 2, 3])


@pytest.mark.parametrize("dtype,out_dtype,tol", [
    ("float32", np.float32, 1e-6), ("float16", np.float16, 1e-2),
    ("bfloat16", np.float32, 1e-2)])
def test_dense_round_trip(fake, rng, dtype, out_dtype, tol):
    servicer, client = fake
    layers = random_stack(rng, [16, 24, 8], ["silu", "gelu_erf"], [True, True])
    client.load_model("rt", layers, dtype=dtype)
    x = rng.standard_normal((5, 16))
    y = client.dense("rt", x)
    assert y.dtype == out_dtype and y.shape == (5, 8)
    check(y, reference(layers, x), tol, dtype)
    sent = servicer.dense_requests[-1]
    assert sent.model == "rt" and sent.input.dtype == tensor_pb2.FLOAT64
    assert list(sent.input.shape) == [5, 16]


def test_dense_input_forms(fake, rng):
    servicer, client = fake
    layers = random_stack(rng, [6, 3], ["none"], [False])
    client.load_model("forms", layers, dtype="float32")
    x1 = rng.standard_normal(6).astype(np.float32)
    y1 = client.dense("forms", x1)
    assert y1.shape == (3,)
    assert list(servicer.dense_requests[-1].input.shape) == [1, 6]
    assert servicer.dense_requests[-1].input.dtype == tensor_pb2.FLOAT32
    client.dense("forms", x1.astype(np.float16))
    assert servicer.dense_requests[-1].input.dtype == tensor_pb2.FLOAT16
    client.dense("forms", np.arange(12, dtype=np.int32).reshape(2, 6))
    assert servicer.dense_requests[-1].input.dtype == tensor_pb2.FLOAT32
    y3 = client.dense("forms", rng.standard_normal((2, 4, 6)))
    assert y3.shape == (2, 4, 3)
    assert list(servicer.dense_requests[-1].input.shape) == [8, 6]
    with pytest.raises(ValueError):
        client.dense("forms", np.float32(1.0))


def test_list_unload_and_errors(fake, rng):
    servicer, client = fake
    assert client.list_models() == []
    client.load_model("a", random_stack(rng, [4, 2], ["none"], [False]))
    with pytest.raises(grpc.RpcError) as e:
        client.load_model("a", random_stack(rng, [4, 2], ["none"], [False]))
    assert e.value.code() == grpc.StatusCode.ALREADY_EXISTS
    listed = client.list_models()
    assert [m["name"] for m in listed] == ["a"]
    assert listed[0]["dtype"] == "bfloat16"
    assert listed[0]["layers"] == [{"in_features": 4, "out_features": 2, "layernorm": False,
                                    "eps": 0.0, "activation": "none"}]
    client.unload_model("a")
    assert client.list_models() == []
    for fn in (lambda: client.unload_model("a"), lambda: client.dense("a", np.ones(4))):
        with pytest.raises(grpc.RpcError) as e:
            fn()
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("layers,kwargs,exc", [
    ([{"bias": np.ones(2)}], {}, ValueError),                          # no weight
    ([{"weight": np.ones((2, 2)), "weights": 1}], {}, ValueError),     # typo
    ([{"weight": np.ones((2, 2)), "activation": "gelu"}], {}, ValueError),
    ([{"weight": np.ones((2, 2)), "layernorm": "yes"}], {}, TypeError),
    ([{"weight": np.ones((2, 2)), "layernorm": {"epsilon": 1}}], {}, ValueError),
    ([{"weight": np.ones((2, 2))}], {"dtype": "float64"}, ValueError),
    ([{"weight": np.ones((2, 2))}], {"chunk_bytes": 0}, ValueError),
    ({"weight": np.ones((2, 2))}, {}, TypeError),                      # not a list
])
def test_bad_layers_raise_before_sending(fake, layers, kwargs, exc):
    servicer, client = fake
    with pytest.raises(exc):
        client.load_model("bad", layers, **kwargs)
    assert servicer.streams == []
