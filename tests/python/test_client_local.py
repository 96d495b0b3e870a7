"""The client's request encoding and response decoding, against an in-process fake server.

No gpucompute-server needed: a Python servicer records each request and answers with
recognisable values, so these tests pin what the client sends and how it reads the reply.
"""

import time

import grpc
import numpy as np
import pytest
from astropy.timeseries import LombScargle

import gpucompute
from rpc_util import fake_server
from gpucompute.v1 import compute_pb2, compute_pb2_grpc, tensor_pb2



class FakeCompute(compute_pb2_grpc.ComputeServicer):
    """Answers power[k] = k (in the request's dtype); echoes uniform/auto grids."""

    def __init__(self):
        self.requests = []
        self.echo_uniform = True
        self.delay_s = 0.0

    def Periodogram(self, request, context):
        self.requests.append(request)
        time.sleep(self.delay_s)
        response = compute_pb2.PeriodogramResponse()
        for i, s in enumerate(request.series):
            y = gpucompute.from_tensor(s.y)
            if not np.all(np.isfinite(y)):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"series[{i}].y: values must be finite")
            grid = s.frequency if s.HasField("frequency") else request.frequency
            kind = grid.WhichOneof("kind") or "auto"
            r = response.results.add()
            if kind == "explicit_frequencies":
                n = gpucompute.from_tensor(grid.explicit_frequencies).size
            elif kind == "uniform":
                n = grid.uniform.n
                if self.echo_uniform:
                    r.grid.CopyFrom(grid.uniform)
            else:
                a = grid.auto
                f = LombScargle(gpucompute.from_tensor(s.t), y).autofrequency(
                    samples_per_peak=a.samples_per_peak if a.HasField("samples_per_peak") else 5,
                    nyquist_factor=a.nyquist_factor if a.HasField("nyquist_factor") else 5,
                    minimum_frequency=(a.minimum_frequency if a.HasField("minimum_frequency")
                                       else None),
                    maximum_frequency=(a.maximum_frequency if a.HasField("maximum_frequency")
                                       else None))
                n = f.size
                r.grid.f0, r.grid.df, r.grid.n = f[0], f[1] - f[0], n
            dtype = np.float32 if request.dtype == tensor_pb2.FLOAT32 else np.float64
            r.power.CopyFrom(gpucompute.to_tensor(np.arange(n, dtype=dtype)))
            r.peak_index, r.peak_power, r.peak_frequency = n - 1, n - 1, 42.0
        context.set_trailing_metadata((
            ("x-gpucompute-queue-us", "12"), ("x-gpucompute-compute-us", "34"),
            ("x-gpucompute-total-us", "50"), ("x-gpucompute-batch-requests", "3")))
        return response

    def ServerInfo(self, request, context):
        return compute_pb2.ServerInfoResponse(
            version="fake", backend="cpu",
            limits=compute_pb2.Limits(max_request_bytes=1 << 40, max_batch_size=8),
            periodogram_batching=compute_pb2.BatchingStats(requests=5, largest_batch=2),
            devices=[compute_pb2.DeviceInfo(index=0, total_memory_bytes=1 << 37)])


@pytest.fixture(scope="module")
def fake():
    servicer = FakeCompute()
    with fake_server(servicer, workers=4) as c:
        yield servicer, c


def _series(rng, n=20):
    t = np.sort(rng.uniform(0, 10, n))
    return t, rng.normal(size=n), rng.uniform(0.5, 1, n)


def test_explicit_frequencies_and_defaults(fake, rng):
    servicer, client = fake
    t, y, dy = _series(rng)
    f = [0.5, 1.0, 1.5]
    freq, power = client.lombscargle(t, y, dy, f)
    req = servicer.requests[-1]
    assert req.HasField("fit_mean") and req.fit_mean
    assert req.HasField("center_data") and req.center_data
    assert req.normalization == compute_pb2.NORMALIZATION_STANDARD
    assert req.dtype == tensor_pb2.FLOAT64
    s = req.series[0]
    for name, value in [("t", t), ("y", y), ("dy", dy)]:
        tensor = getattr(s, name)
        assert tensor.dtype == tensor_pb2.FLOAT64 and list(tensor.shape) == [len(t)]
        assert tensor.data == np.asarray(value, "<f8").tobytes()
    assert not s.HasField("frequency")
    sent = req.frequency.explicit_frequencies
    assert sent.dtype == tensor_pb2.FLOAT64
    np.testing.assert_array_equal(gpucompute.from_tensor(sent), f)
    np.testing.assert_array_equal(freq, f)
    assert freq.dtype == np.float64 and power.dtype == np.float64
    np.testing.assert_array_equal(power, [0, 1, 2])


def test_no_dy_leaves_dy_unset(fake, rng):
    servicer, client = fake
    t, y, _ = _series(rng)
    client.lombscargle(t, y, frequency=[1.0])
    assert not servicer.requests[-1].series[0].HasField("dy")


@pytest.mark.parametrize("name,code", [
    ("standard", compute_pb2.NORMALIZATION_STANDARD), ("model", compute_pb2.NORMALIZATION_MODEL),
    ("log", compute_pb2.NORMALIZATION_LOG), ("psd", compute_pb2.NORMALIZATION_PSD)])
@pytest.mark.parametrize("fit_mean", [True, False])
@pytest.mark.parametrize("center_data", [True, False])
def test_options_are_sent(fake, rng, name, code, fit_mean, center_data):
    servicer, client = fake
    t, y, dy = _series(rng)
    _, power = client.lombscargle(t, y, dy, [1.0, 2.0], fit_mean=fit_mean,
                                  center_data=center_data, normalization=name, dtype="float32")
    req = servicer.requests[-1]
    assert req.normalization == code
    assert req.HasField("fit_mean") and req.fit_mean == fit_mean
    assert req.HasField("center_data") and req.center_data == center_data
    assert req.dtype == tensor_pb2.FLOAT32
    assert power.dtype == np.float32


def test_bad_options_raise_before_sending(fake, rng):
    _, client = fake
    t, y, dy = _series(rng)
    with pytest.raises(ValueError, match="normalization"):
        client.lombscargle(t, y, dy, [1.0], normalization="spectral")
    with pytest.raises(ValueError, match="dtype"):
        client.lombscargle(t, y, dy, [1.0], dtype="float16")


@pytest.mark.parametrize("echo", [True, False])
@pytest.mark.parametrize("form", ["namedtuple", "dict"])
def test_uniform_grid(fake, rng, echo, form):
    servicer, client = fake
    servicer.echo_uniform = echo
    try:
        t, y, dy = _series(rng)
        grid = gpucompute.UniformGrid(0.1, 0.01, 7)
        freq, power = client.lombscargle(t, y, dy, grid if form == "namedtuple"
                                         else dict(grid._asdict()))
    finally:
        servicer.echo_uniform = True
    u = servicer.requests[-1].frequency.uniform
    assert (u.f0, u.df, u.n) == (0.1, 0.01, 7)
    np.testing.assert_array_equal(freq, 0.1 + 0.01 * np.arange(7))
    assert power.shape == (7,)


def test_uniform_frequencies_are_new_arrays_each_call(fake, rng):
    """The client keeps the last grids' frequencies to copy them: what a call returns is the
    caller's own (writable, not shared), and equals Astropy's f0 + df * arange(n) each time."""
    _, client = fake
    t, y, dy = _series(rng)
    grid = gpucompute.UniformGrid(0.3, 0.007, 9)
    first, _ = client.lombscargle(t, y, dy, grid)
    first *= -1  # the caller may do as it likes with its array
    second, _ = client.lombscargle(t, y, dy, grid)
    assert second is not first and second.flags.writeable
    np.testing.assert_array_equal(second, 0.3 + 0.007 * np.arange(9))
    for n in range(2, 40):  # many grids: the kept ones stay few
        client.lombscargle(t, y, dy, gpucompute.UniformGrid(0.1, 0.01, n))
    assert len(gpucompute.grids._GRID_CACHE) <= gpucompute.grids._GRID_CACHE_SIZE


@pytest.mark.parametrize("kwargs", [
    {}, {"samples_per_peak": 10, "nyquist_factor": 2},
    {"minimum_frequency": 0.05, "maximum_frequency": 3.0}])
def test_auto_grid(fake, rng, kwargs):
    servicer, client = fake
    t, y, dy = _series(rng, 37)
    freq, power = client.lombscargle(t, y, dy, **kwargs)
    auto = servicer.requests[-1].frequency.auto
    assert servicer.requests[-1].frequency.WhichOneof("kind") == "auto"
    assert auto.samples_per_peak == kwargs.get("samples_per_peak", 5)
    assert auto.nyquist_factor == kwargs.get("nyquist_factor", 5)
    assert auto.HasField("minimum_frequency") == ("minimum_frequency" in kwargs)
    assert auto.HasField("maximum_frequency") == ("maximum_frequency" in kwargs)
    expected = LombScargle(t, y, dy).autofrequency(**kwargs)
    # The fake echoes (f[0], f[1] - f[0], n); the client must rebuild f0 + df * arange(n).
    np.testing.assert_allclose(freq, expected, rtol=1e-12)
    assert freq.shape == power.shape


def test_batch_forms_and_peaks(fake, rng):
    servicer, client = fake
    (t1, y1, dy1), (t2, y2, _), (t3, y3, dy3) = _series(rng, 10), _series(rng, 11), _series(rng, 12)
    series = [(t1, y1, dy1), (t2, y2),
              {"t": t3, "y": y3, "dy": dy3, "frequency": gpucompute.UniformGrid(1, 1, 4)}]
    out = client.lombscargle_batch(series, [0.5, 0.7])
    req = servicer.requests[-1]
    assert len(req.series) == 3
    assert req.series[0].HasField("dy") and not req.series[1].HasField("dy")
    assert req.series[2].frequency.uniform.n == 4
    assert [f.tolist() for f, _ in out] == [[0.5, 0.7], [0.5, 0.7], [1, 2, 3, 4]]
    results = client.lombscargle_batch(series, [0.5, 0.7], return_peaks=True)
    assert all(isinstance(r, gpucompute.PeriodogramResult) for r in results)
    assert results[2].peak_index == 3 and results[2].peak_power == 3.0
    assert results[2].peak_frequency == 42.0 and results[2].grid == (1, 1, 4)
    f, p = results[0]
    np.testing.assert_array_equal(f, [0.5, 0.7])


def test_timings_from_trailing_metadata(fake, rng):
    _, client = fake
    t, y, dy = _series(rng)
    client.lombscargle(t, y, dy, [1.0])
    assert client.last_timings == {"queue_us": 12, "compute_us": 34, "total_us": 50,
                                   "batch_requests": 3}


def test_errors_propagate(fake, rng):
    _, client = fake
    t, y, dy = _series(rng)
    y[3] = np.nan
    with pytest.raises(grpc.RpcError) as e:
        client.lombscargle(t, y, dy, [1.0])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "series[0].y" in e.value.details()


def test_deadline(fake, rng):
    servicer, client = fake
    servicer.delay_s = 1.0
    try:
        with pytest.raises(grpc.RpcError) as e:
            client.lombscargle(*_series(rng), [1.0], timeout=0.2)
    finally:
        servicer.delay_s = 0.0
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_server_info_dict(fake):
    _, client = fake
    info = client.server_info()
    assert info["backend"] == "cpu" and info["version"] == "fake"
    assert info["limits"]["maxRequestBytes"] == 1 << 40      # int, not a JSON string
    assert info["limits"]["maxSeriesPerRequest"] == 0        # defaults are present
    assert info["periodogramBatching"]["largestBatch"] == 2
    assert info["devices"][0]["totalMemoryBytes"] == 1 << 37
    assert info["nvrtcVersion"] == ""


def test_large_messages(fake):
    _, client = fake
    client.transfer_threshold = 0  # one message each way (the fake has no resident tensors)
    n = 3_000_000  # 48 MB of t and y: over gRPC's 4 MB default
    t = np.arange(n, dtype=np.float64)
    freq, power = client.lombscargle(t, np.zeros(n), frequency=np.linspace(0.1, 1, n))
    assert power.shape == (n,)
