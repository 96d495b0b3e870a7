"""The Python client's per-call path through a real server: what each call builds and decodes
(request built in place, arrays encoded once, replies decoded once) gives the same arrays,
grids and errors as the plain protobuf messages and NumPy would, for every form of input."""

import grpc
import numpy as np
import pytest

import gpucompute
from gpucompute import grids, models, tensor
from gpucompute.v1 import compute_pb2, tensor_pb2

from series_util import make_series

DENSE_MODEL = "call_path_dense"


def astropy_grid(f0, df, n):
    """Astropy's autofrequency formula: ``minimum_frequency + df * np.arange(Nf)``."""
    return f0 + df * np.arange(n)


@pytest.mark.parametrize("f0, df, n", [(0.005, 0.005, 1000), (1 / 3, 1 / 7, 12345),
                                       (2.5e-5, 3.3e-7, 100_000), (0.1, 1e-3, 1), (1.0, 2.0, 0)])
def test_uniform_frequencies_are_astropys_bit_for_bit(f0, df, n):
    f = grids.uniform_frequencies(grids.UniformGrid(f0, df, n))
    assert f.dtype == np.float64 and f.shape == (n,) and f.flags.writeable
    assert f.tobytes() == astropy_grid(f0, df, n).tobytes()


def test_batch_mixing_shared_and_own_grids(client, rng):
    """Series with the request's grid, with explicit frequencies of their own and with a
    uniform grid of their own (a dict), with and without dy, in one call."""
    shared = gpucompute.UniformGrid(0.01, 0.004, 300)
    own_uniform = {"f0": 0.02, "df": 0.003, "n": 200}
    t0, y0, dy0, _ = make_series(rng)
    t1, y1, _, f1 = make_series(rng, with_dy=False)
    t2, y2, dy2, _ = make_series(rng)
    explicit = np.sort(rng.uniform(0.01, 1.5, 120))
    series = [(t0, y0, dy0), {"t": t1, "y": y1, "frequency": explicit},
              {"t": t2, "y": y2, "dy": dy2, "frequency": own_uniform}, (t1, y1)]
    results = client.periodogram(series, shared)
    assert len(results) == 4
    assert results[0].grid == shared and results[3].grid == shared
    assert results[0].frequency.tobytes() == astropy_grid(*shared).tobytes()
    assert results[1].grid is None
    np.testing.assert_array_equal(results[1].frequency, explicit)
    assert results[2].grid == gpucompute.UniformGrid(**own_uniform)
    assert results[2].frequency.tobytes() == astropy_grid(0.02, 0.003, 200).tobytes()
    # Each result equals the same series sent alone.
    for item, result in zip(series, results):
        if isinstance(item, dict):
            alone = client.lombscargle(item["t"], item["y"], item.get("dy"), item["frequency"])
        else:
            alone = client.lombscargle(*item, frequency=shared)
        np.testing.assert_array_equal(result.frequency, alone[0])
        np.testing.assert_array_equal(result.power, alone[1])
        assert result.power.flags.writeable and result.power.dtype == np.float64


def test_each_call_returns_arrays_of_its_own(client, rng):
    """Nothing is shared between calls: changing one call's arrays leaves the next intact."""
    t, y, _, _ = make_series(rng, with_dy=False)
    grid = gpucompute.UniformGrid(0.01, 0.01, 100)
    f_first, p_first = client.lombscargle(t, y, frequency=grid)
    kept_f, kept_p = f_first.copy(), p_first.copy()
    f_first[:] = -1.0
    p_first[:] = -1.0
    f_second, p_second = client.lombscargle(t, y, frequency=grid)
    np.testing.assert_array_equal(f_second, kept_f)
    np.testing.assert_array_equal(p_second, kept_p)


def test_inputs_of_any_layout_and_byte_order_give_the_same_periodogram(client, rng):
    t, y, dy, _ = make_series(rng)
    grid = gpucompute.UniformGrid(0.01, 0.01, 150)
    expected = client.lombscargle(t, y, dy, grid)[1]
    forms = [
        (t.astype(">f8"), y.astype(">f8"), dy.astype(">f8")),  # big-endian
        (list(t), list(y), list(dy)),                          # lists
        (np.stack([t, y], axis=1)[:, 0], np.stack([y, t], axis=1)[:, 0], dy),  # strided views
    ]
    for ft, fy, fdy in forms:
        np.testing.assert_array_equal(client.lombscargle(ft, fy, fdy, grid)[1], expected)


def test_false_alarm_and_model_arrays(client, rng):
    t, y, dy, f_signal = make_series(rng)
    probabilities = [0.5, 0.01, 1e-4]
    powers = [0.05, 0.2]
    (result,) = client.periodogram(
        [{"t": t, "y": y, "dy": dy, "model": {"frequency": f_signal, "t": t[:5]}}],
        top_k=3, false_alarm={"method": "baluev", "probabilities": probabilities,
                              "powers": powers}, model_parameters=True)
    fa = result.false_alarm
    for key, asked in (("levels", probabilities), ("probabilities", powers)):
        assert fa[key].dtype == np.float64 and fa[key].shape == (len(asked),)
        assert fa[key].flags.writeable and fa[key].flags.owndata
    assert np.all(np.diff(fa["levels"]) > 0)  # smaller probabilities need higher peaks
    assert np.all(np.diff(fa["probabilities"]) < 0)
    params = result.model["parameters"]
    assert params.dtype == np.float64 and params.shape == (3,)
    assert result.model["y"].shape == (5,)
    (plain,) = client.periodogram([(t, y, dy)], top_k=3, false_alarm="baluev")
    assert plain.false_alarm["levels"].shape == (0,)
    assert plain.false_alarm["probabilities"].shape == (0,)
    assert plain.false_alarm["levels"].dtype == np.float64
    assert [p["index"] for p in plain.peaks] == [p["index"] for p in result.peaks]


def test_survey_discard_gives_peaks_without_power(client, rng):
    series = [make_series(rng, with_dy=False)[:2] for _ in range(20)]
    inline = client.periodogram(series, top_k=2, false_alarm="baluev")
    discarded = client.periodogram(series, top_k=2, false_alarm="baluev", output="discard")
    for a, b in zip(inline, discarded):
        assert b.power is None and a.power is not None
        assert a.grid == b.grid and a.peaks == b.peaks
        assert a.false_alarm["peak_probability"] == b.false_alarm["peak_probability"]


@pytest.mark.parametrize("dtype, code", [("float64", tensor_pb2.FLOAT64),
                                         ("float32", tensor_pb2.FLOAT32),
                                         (np.float32, tensor_pb2.FLOAT32),
                                         (np.dtype(">f8"), tensor_pb2.FLOAT64),
                                         ("f4", tensor_pb2.FLOAT32)])
def test_compute_dtype_spellings(dtype, code):
    assert tensor.compute_dtype(dtype) == code


@pytest.mark.parametrize("dtype", ["int32", "float16", np.int64, "Float64"])
def test_compute_dtype_rejects_others(dtype):
    with pytest.raises((ValueError, TypeError)):
        tensor.compute_dtype(dtype)


def test_to_tensor_keeps_shapes_and_copies_once():
    zero_d = tensor.to_tensor(np.float64(2.5))
    assert list(zero_d.shape) == [] and tensor.from_tensor(zero_d).shape == ()
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = tensor.to_tensor(strided)
    assert t.data == np.ascontiguousarray(strided).tobytes() and list(t.shape) == [3, 2]
    seen = []
    a = np.arange(5.0)
    tensor.to_tensor(a, "float64", lambda code, wire: seen.append(wire) or
                     tensor.inline_tensor(code, wire))
    assert np.shares_memory(seen[0], a)  # little-endian and C-ordered already: not copied


def test_from_tensor_payload_errors():
    handle = tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT64, shape=[3], handle="h")
    with pytest.raises(ValueError, match="payload"):
        tensor.from_tensor(handle)
    assert tensor.from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT32, shape=[2, 0],
                                                handle="h")).shape == (2, 0)
    with pytest.raises(ValueError, match="bytes"):
        tensor.from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.BFLOAT16, shape=[3], data=b"\0"))
    with pytest.raises(ValueError, match="bytes"):
        tensor.from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT32, shape=[2], data=b""))


@pytest.mark.parametrize("dtype, code", [("<f4", tensor_pb2.FLOAT32), (">f4", tensor_pb2.FLOAT32),
                                         (">f8", tensor_pb2.FLOAT64), ("<f2", tensor_pb2.FLOAT16),
                                         (">f2", tensor_pb2.FLOAT16), ("int64", tensor_pb2.FLOAT32),
                                         ("bool", tensor_pb2.FLOAT32)])
def test_wire_array_little_endian(dtype, code):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    got_code, wire = models.wire_array(a.T)
    assert got_code == code
    assert wire.dtype.byteorder in ("<", "=", "|") and wire.flags.c_contiguous
    np.testing.assert_array_equal(wire, a.T)


@pytest.fixture(scope="module")
def dense_model(client):
    rng = np.random.default_rng(5)
    layer = {"weight": rng.standard_normal((16, 8)).astype(np.float32),
             "bias": rng.standard_normal(8).astype(np.float32), "layernorm": True,
             "activation": "gelu_tanh"}
    try:
        client.unload_model(DENSE_MODEL)
    except grpc.RpcError:
        pass
    client.load_model(DENSE_MODEL, [layer], dtype="bfloat16")
    yield DENSE_MODEL
    client.unload_model(DENSE_MODEL)


def test_dense_inputs_of_any_form(client, dense_model, rng):
    x = rng.standard_normal((6, 16)).astype(np.float32)
    expected = client.dense(dense_model, x)
    assert expected.shape == (6, 8) and expected.dtype == np.float32
    assert expected.flags.writeable
    np.testing.assert_array_equal(client.dense(dense_model, x.astype(">f4")), expected)
    np.testing.assert_array_equal(client.dense(dense_model, np.asfortranarray(x)), expected)
    np.testing.assert_array_equal(client.dense(dense_model, x[0]),
                                  client.dense(dense_model, x[:1])[0])
    np.testing.assert_array_equal(client.dense(dense_model, x.reshape(2, 3, 16)),
                                  expected.reshape(2, 3, 8))
    # The reply decoded as the raw stub would: bfloat16 bits widened into float32.
    reply = client.stub.Dense(compute_pb2.DenseRequest(
        model=dense_model, input=tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT32, shape=[6, 16],
                                                   data=x.tobytes())))
    bits = np.frombuffer(reply.output.data, dtype="<u2").astype(np.uint32) << 16
    np.testing.assert_array_equal(bits.view(np.float32).reshape(6, 8), expected)
    with pytest.raises(ValueError, match="dimension"):
        client.dense(dense_model, np.float32(1.0))


def test_echo_of_any_layout(client, rng):
    a = rng.standard_normal((4, 5))
    for form in (a, a.T, a.astype(">f8"), np.float64(3.0), a[:, 1:4]):
        out = client.echo(form)
        np.testing.assert_array_equal(out, form)
        assert out.shape == np.shape(form) and out.flags.writeable
