"""Bad input over gRPC: the right status code, a field path in the details, and a server that
keeps serving afterwards."""


import grpc
import numpy as np
import pytest

import gpucompute
from rpc_util import expect_rpc_error
from gpucompute.v1 import compute_pb2, tensor_pb2
from series_util import astropy_power, make_series


def _good(rng, n=60):
    t, y, dy, _ = make_series(rng, n, baseline=30.0)
    return t, y, dy




def _check_still_serving(client, rng):
    t, y, dy = _good(rng)
    f = np.linspace(0.05, 1.0, 100)
    _, power = client.lombscargle(t, y, dy, f)
    ref = astropy_power(t, y, dy, f)
    assert np.max(np.abs(power - ref)) <= 1e-9 * ref.max()


@pytest.mark.parametrize("index", [0, 2])
def test_mismatched_lengths(client, rng, index):
    series = [_good(rng) for _ in range(3)]
    t, y, dy = series[index]
    series[index] = (t, y[:-1], dy[:-1])
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.lombscargle_batch(series, [0.5, 1.0]),
            rf"series\[{index}\]\.(y|t)\b")
    _check_still_serving(client, rng)


def test_mismatched_dy_length(client, rng):
    t, y, dy = _good(rng)
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.lombscargle(t, y, dy[:-2], [0.5]), r"series\[0\]\.dy\b")


@pytest.mark.parametrize("field,value", [
    ("y", np.nan), ("y", np.inf), ("t", np.nan), ("t", -np.inf),
    ("dy", 0.0), ("dy", -1.0), ("dy", np.nan), ("dy", np.inf)])
def test_bad_values(client, rng, field, value):
    t, y, dy = _good(rng)
    arrays = {"t": t, "y": y, "dy": dy}
    arrays[field][int(rng.integers(len(t)))] = value
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.lombscargle(arrays["t"], arrays["y"], arrays["dy"], [0.5, 1.0]),
            rf"series\[0\]\.{field}\b")
    _check_still_serving(client, rng)


@pytest.mark.parametrize("field,value", [("y", np.nan), ("t", np.inf), ("dy", 0.0)])
def test_bad_values_in_packed_series_name_their_series(client, rng, field, value):
    """Many (t, y, dy) arrays travel packed, each array's series in one tensor: a bad value is
    still named by its series and its index there, and so is a series too short."""
    series = [_good(rng) for _ in range(4)]
    assert gpucompute.client._packed_series(series) is not None
    arrays = dict(zip(("t", "y", "dy"), (a.copy() for a in series[2])))
    k = int(rng.integers(len(arrays["t"])))
    arrays[field][k] = value
    series[2] = (arrays["t"], arrays["y"], arrays["dy"])
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: client.lombscargle_batch(series, [0.5, 1.0]),
                     rf"series\[2\]\.{field}: values must be finite( and > 0)? \(index {k} ")
    series[2] = tuple(a[:1] for a in series[1])
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: client.lombscargle_batch(series, [0.5, 1.0]),
                     r"series\[2\]\.t: a series needs at least 2 samples \(got 1\)")
    _check_still_serving(client, rng)


@pytest.mark.parametrize("bad", [0.0, -0.3, np.nan, np.inf])
def test_bad_explicit_frequency(client, rng, bad):
    t, y, dy = _good(rng)
    f = np.linspace(0.1, 1.0, 10)
    f[int(rng.integers(10))] = bad
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.lombscargle(t, y, dy, f), r"frequenc")
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.lombscargle_batch([{"t": t, "y": y, "frequency": f}], [0.5]),
            r"series\[0\]\.frequenc")
    _check_still_serving(client, rng)


def test_offset_only_model_is_refused_not_computed_as_one_term(client, rng):
    """nterms=0 (Astropy's offset-only model) is an error naming the field, not a periodogram of
    one term; a request that leaves nterms unset gets the default, 1."""
    t, y, dy = _good(rng)
    f = np.linspace(0.1, 1.0, 10)
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: client.lombscargle(t, y, dy, f, nterms=0), r"nterms: 0")
    request = compute_pb2.PeriodogramRequest(
        series=[compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y),
                                   dy=gpucompute.to_tensor(dy))],
        frequency=compute_pb2.FrequencyGrid(explicit_frequencies=gpucompute.to_tensor(f)))
    assert not request.HasField("nterms")
    power = np.frombuffer(client.stub.Periodogram(request).results[0].power.data, "<f8")
    np.testing.assert_allclose(power, astropy_power(t, y, dy, f), rtol=0, atol=1e-9)
    _check_still_serving(client, rng)


def _raw_request(rng, **overrides):
    """A valid PeriodogramRequest (one series, explicit grid), with fields replaced."""
    t, y, dy = _good(rng, 20)
    series = compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y),
                                dy=gpucompute.to_tensor(dy))
    for name, tensor in overrides.pop("series_fields", {}).items():
        getattr(series, name).CopyFrom(tensor)
    request = compute_pb2.PeriodogramRequest(
        series=[series],
        frequency=compute_pb2.FrequencyGrid(
            explicit_frequencies=gpucompute.to_tensor(np.linspace(0.1, 1, 5))))
    for name, value in overrides.items():
        setattr(request, name, value)
    return request


@pytest.mark.parametrize("case", ["int32_t", "short_data", "two_d_y", "float16_dy",
                                  "unspecified_dtype"])
def test_malformed_tensors(client, rng, case):
    n = 20
    fields = {
        "int32_t": {"t": gpucompute.to_tensor(np.arange(n, dtype=np.int32))},
        "short_data": {"y": tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT64, shape=[n],
                                              data=b"\0" * (8 * n - 3))},
        "two_d_y": {"y": gpucompute.to_tensor(np.ones((n, 1)))},
        "float16_dy": {"dy": gpucompute.to_tensor(np.ones(n, dtype=np.float16))},
        "unspecified_dtype": {"t": tensor_pb2.Tensor(shape=[n], data=b"\0" * (8 * n))},
    }[case]
    field = next(iter(fields))
    request = _raw_request(rng, series_fields=fields)
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.stub.Periodogram(request, timeout=30), rf"series\[0\]\.{field}\b")
    _check_still_serving(client, rng)


@pytest.mark.parametrize("field,value", [("dtype", tensor_pb2.FLOAT16),
                                         ("dtype", tensor_pb2.INT32),
                                         ("normalization", 17)])
def test_bad_request_options(client, rng, field, value):
    request = _raw_request(rng, **{field: value})
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
            lambda: client.stub.Periodogram(request, timeout=30), field)


@pytest.mark.parametrize("case", ["no_series", "empty_series", "one_sample", "equal_times",
                                  "constant_y", "empty_grid"])
def test_degenerate_input_does_not_break_the_server(client, rng, case):
    """Inputs without an obvious answer: OK or INVALID_ARGUMENT, never a crash or INTERNAL."""
    t, y, dy = _good(rng, 10)
    f = np.linspace(0.1, 1.0, 5)
    call = {
        "no_series": lambda: client.lombscargle_batch([], f),
        "empty_series": lambda: client.lombscargle(t[:0], y[:0], None, f),
        "one_sample": lambda: client.lombscargle(t[:1], y[:1], dy[:1], f),
        "equal_times": lambda: client.lombscargle(np.full(10, 3.0), y, dy),
        "constant_y": lambda: client.lombscargle(t, np.ones(10), dy, f),
        "empty_grid": lambda: client.lombscargle(t, y, dy, np.zeros(0)),
    }[case]
    try:
        out = call()
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.code(), e.details())
    else:
        if case == "no_series":
            assert out == []
    _check_still_serving(client, rng)


def test_frequency_limit(client, rng):
    limits = client.server_info()["limits"]
    m = limits["maxFrequenciesPerSeries"]
    assert m > 0
    t, y, dy = _good(rng, 10)
    expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
            lambda: client.lombscargle(t, y, dy, gpucompute.UniformGrid(0.01, 1e-6, m + 1)),
            r"frequenc")
    _check_still_serving(client, rng)


def test_client_deadline(client, rng):
    t, y, dy, _ = make_series(rng, 400)
    expect_rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED,
            lambda: client.lombscargle(t, y, dy, np.linspace(0.01, 5, 20_000), timeout=1e-3))
    _check_still_serving(client, rng)
