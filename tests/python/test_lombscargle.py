"""Periodograms from the server against Astropy's LombScargle and SciPy's lombscargle.

Every input is fresh random data (seed printed by the ``rng`` fixture). Tolerances: float64
within 1e-9 of the reference's peak power; float32 within 1e-4 absolute in standard
normalization (power in [0, 1]).
"""

import numpy as np
import pytest
import scipy.signal
from astropy.timeseries import LombScargle

import gpucompute
from series_util import assert_power_close, astropy_power, frequency_grid, make_series

NORMALIZATIONS = ["standard", "model", "log", "psd"]
F64_RTOL_OF_MAX = 1e-9
F32_ATOL = 1e-4


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("with_dy", [True, False], ids=["dy", "no_dy"])
@pytest.mark.parametrize("fit_mean", [True, False], ids=["fit_mean", "no_fit_mean"])
@pytest.mark.parametrize("center_data", [True, False], ids=["center", "no_center"])
def test_matches_astropy_float64(client, rng, normalization, with_dy, fit_mean, center_data):
    t, y, dy, f_signal = make_series(rng, with_dy=with_dy)
    f = frequency_grid(rng, t, f_signal)
    opts = dict(fit_mean=fit_mean, center_data=center_data, normalization=normalization)
    freq, power = client.lombscargle(t, y, dy, f, **opts)
    np.testing.assert_array_equal(freq, f)
    assert power.dtype == np.float64
    ref = astropy_power(t, y, dy, f, **opts)
    assert_power_close(power, ref, rtol_of_max=F64_RTOL_OF_MAX,
                       context=f"n={len(t)} m={len(f)} {opts}")


def test_matches_astropy_cython_method(client, rng):
    t, y, dy, f_signal = make_series(rng)
    f = frequency_grid(rng, t, f_signal)
    _, power = client.lombscargle(t, y, dy, f)
    ref = astropy_power(t, y, dy, f, method="cython")
    assert_power_close(power, ref, rtol_of_max=F64_RTOL_OF_MAX)


def test_peak_fields(client, rng):
    t, y, dy, f_signal = make_series(rng)
    f = frequency_grid(rng, t, f_signal)
    (r,) = client.periodogram([(t, y, dy)], f)
    k = int(np.argmax(r.power))
    assert r.peak_index == k
    assert r.peak_frequency == f[k]
    assert r.peak_power == r.power[k]
    assert r.grid is None
    # The injected signal is strong (amplitude >= 1.5 x noise): the peak is at it.
    assert abs(r.peak_frequency - f_signal) < 1.5 / (t[-1] - t[0])


@pytest.mark.parametrize("kwargs", [
    {},
    {"samples_per_peak": 10, "nyquist_factor": 2},
    {"samples_per_peak": 3.5, "nyquist_factor": 1.5, "minimum_frequency": 0.05},
    {"minimum_frequency": 0.02, "maximum_frequency": 1.7},
    {"maximum_frequency": 0.9},
])
def test_autofrequency(client, rng, kwargs):
    t, y, dy, _ = make_series(rng)
    ls = LombScargle(t, y, dy)
    expected = ls.autofrequency(**kwargs)
    (r,) = client.periodogram([(t, y, dy)], None, **kwargs)
    assert r.grid is not None, "server did not return the grid it used"
    assert r.frequency.shape == expected.shape, (r.grid, expected[[0, 1, -1]], expected.size)
    np.testing.assert_allclose(r.frequency, expected, rtol=1e-12, atol=0)
    # Power on the reference's own grid (a shift-invariant t: see astropy_power).
    assert_power_close(r.power, astropy_power(t, y, dy, expected),
                       rtol_of_max=F64_RTOL_OF_MAX, context=f"autopower {kwargs}")
    # lombscargle() with frequency=None is the same request.
    freq, power = client.lombscargle(t, y, dy, **kwargs)
    np.testing.assert_array_equal(freq, r.frequency)
    np.testing.assert_array_equal(power, r.power)


def test_uniform_grid(client, rng):
    t, y, dy, f_signal = make_series(rng)
    baseline = t[-1] - t[0]
    grid = gpucompute.UniformGrid(0.1 / baseline, 0.2 / baseline, int(2 * f_signal * baseline * 5))
    freq, power = client.lombscargle(t, y, dy, grid)
    np.testing.assert_array_equal(freq, grid.f0 + grid.df * np.arange(grid.n))
    assert_power_close(power, astropy_power(t, y, dy, freq), rtol_of_max=F64_RTOL_OF_MAX)


@pytest.mark.parametrize("with_dy", [True, False], ids=["dy", "no_dy"])
def test_float32_vs_astropy_float64(client, rng, with_dy):
    t, y, dy, f_signal = make_series(rng, with_dy=with_dy)
    f = frequency_grid(rng, t, f_signal)
    freq, power = client.lombscargle(t, y, dy, f, dtype="float32")
    assert power.dtype == np.float32
    assert_power_close(power, astropy_power(t, y, dy, f), atol=F32_ATOL, context="float32")


@pytest.mark.parametrize("with_dy", [True, False], ids=["dy", "no_dy"])
def test_float32_long_baseline_high_frequency(client, rng, with_dy):
    """Julian-date-like times (2.4e6 + [0, 3000] days) and frequencies up to 50 /day.

    Phases 2 pi f t reach ~1e9 rad, far beyond float32's exact range: the server must reduce
    them in double (or from offsets) before float32 arithmetic.
    """
    f_signal = float(rng.uniform(40, 49))
    t, y, dy, _ = make_series(rng, 400, baseline=3000.0, offset=2.4e6, with_dy=with_dy,
                              f_signal=f_signal)
    df = 1 / (3000.0 * 5)
    # Around the signal at full resolution, as a uniform grid ...
    near = gpucompute.UniformGrid(f_signal - 300 * df, df, 600)
    freq, power = client.lombscargle(t, y, dy, near, dtype="float32")
    ref = astropy_power(t, y, dy, freq)
    assert_power_close(power, ref, atol=F32_ATOL, context="float32 near the signal")
    assert abs(freq[np.argmax(power)] - f_signal) < 2 * df
    # ... and explicit frequencies over the whole band up to 50 /day.
    f = np.sort(rng.uniform(0.001, 50.0, 2000))
    _, power = client.lombscargle(t, y, dy, f, dtype="float32")
    assert_power_close(power, astropy_power(t, y, dy, f), atol=F32_ATOL,
                       context="float32 over 0..50 /day")


def test_float64_long_baseline_high_frequency(client, rng):
    """float64 on Julian-date-like times: no worse than Astropy on the same absolute times.

    The reference is Astropy on t - t[0] (exact phases); Astropy on the absolute t itself is
    off by ~1e-8 of the peak here (2 pi f t ~ 1e9 rad), which sets the bar.
    """
    f_signal = float(rng.uniform(40, 49))
    t, y, dy, _ = make_series(rng, 300, baseline=3000.0, offset=2.4e6, f_signal=f_signal)
    f = np.sort(np.concatenate([rng.uniform(0.001, 50.0, 1000),
                                f_signal + np.linspace(-5, 5, 200) / 3000.0]))
    _, power = client.lombscargle(t, y, dy, f)
    ref = astropy_power(t, y, dy, f)
    astropy_abs_t = LombScargle(t, y, dy).power(f, method="slow")
    tol = max(1e-8 * ref.max(), 2 * np.max(np.abs(astropy_abs_t - ref)))
    assert_power_close(power, ref, atol=tol, context="float64, t ~ 2.4e6")


def test_matches_scipy(client, rng):
    """SciPy's lombscargle is our psd normalization without a floating mean, on centred y.

    scipy.signal.lombscargle(t, y - y.mean(), 2 pi f)  (SciPy 1.10: precenter=False,
    normalize=False; angular frequencies) == client.lombscargle(t, y, None, f,
    fit_mean=False, center_data=True, normalization="psd").
    """
    t, y, _, f_signal = make_series(rng, with_dy=False)
    f = frequency_grid(rng, t, f_signal)
    _, power = client.lombscargle(t, y, None, f, fit_mean=False, center_data=True,
                                  normalization="psd")
    ref = scipy.signal.lombscargle(t, y - y.mean(), 2 * np.pi * f)
    assert_power_close(power, ref, rtol_of_max=F64_RTOL_OF_MAX, context="scipy")


def test_batch_mixed_lengths(client, rng):
    lengths = [5, 7, 50, 133, 400, 64, 251]
    data = [make_series(rng, n, with_dy=bool(i % 2)) for i, n in enumerate(lengths)]
    series = [(t, y) if dy is None else (t, y, dy) for t, y, dy, _ in data]
    f = np.sort(rng.uniform(0.005, 2.5, 700))
    for normalization in ["standard", "psd"]:
        out = client.lombscargle_batch(series, f, normalization=normalization)
        assert len(out) == len(series)
        for i, ((freq, power), (t, y, dy, _)) in enumerate(zip(out, data)):
            np.testing.assert_array_equal(freq, f)
            ref = astropy_power(t, y, dy, f, normalization=normalization)
            assert_power_close(power, ref, rtol_of_max=F64_RTOL_OF_MAX,
                               context=f"series {i} (n={len(t)}, {normalization})")


def test_batch_autofrequency_per_series(client, rng):
    data = [make_series(rng, n) for n in [60, 300, 120]]
    results = client.lombscargle_batch([(t, y, dy) for t, y, dy, _ in data],
                                       samples_per_peak=4, return_peaks=True)
    for i, (r, (t, y, dy, _)) in enumerate(zip(results, data)):
        expected = LombScargle(t, y, dy).autofrequency(samples_per_peak=4)
        assert r.frequency.shape == expected.shape, f"series {i}"
        np.testing.assert_allclose(r.frequency, expected, rtol=1e-12, atol=0)
        assert_power_close(r.power, astropy_power(t, y, dy, expected),
                           rtol_of_max=F64_RTOL_OF_MAX, context=f"series {i}")
        assert r.peak_index == int(np.argmax(r.power))


def test_batch_per_series_grid_override(client, rng):
    (t1, y1, dy1, fs1), (t2, y2, dy2, _) = make_series(rng), make_series(rng)
    own = frequency_grid(rng, t1, fs1, m=300)
    shared = np.linspace(0.01, 1.0, 250)
    out = client.lombscargle_batch(
        [{"t": t1, "y": y1, "dy": dy1, "frequency": own}, (t2, y2, dy2)], shared)
    np.testing.assert_array_equal(out[0][0], own)
    np.testing.assert_array_equal(out[1][0], shared)
    assert_power_close(out[0][1], astropy_power(t1, y1, dy1, own), rtol_of_max=F64_RTOL_OF_MAX)
    assert_power_close(out[1][1], astropy_power(t2, y2, dy2, shared),
                       rtol_of_max=F64_RTOL_OF_MAX)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float32_inputs_are_accepted(client, rng, dtype):
    """t/y/dy sent as float32 tensors (raw request) give the float64 reference of those values."""
    from gpucompute.v1 import compute_pb2
    t, y, dy, f_signal = make_series(rng, 100, baseline=50.0)
    t, y, dy = (a.astype(np.float32) for a in (t, y, dy))
    f = frequency_grid(rng, t.astype(np.float64), f_signal)
    request = compute_pb2.PeriodogramRequest(
        series=[compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y),
                                   dy=gpucompute.to_tensor(dy))],
        frequency=compute_pb2.FrequencyGrid(explicit_frequencies=gpucompute.to_tensor(f)),
        dtype=gpucompute.tensor.wire_dtype(dtype))
    response = client.stub.Periodogram(request, timeout=60)
    power = gpucompute.from_tensor(response.results[0].power)
    assert power.dtype == np.dtype(dtype)
    ref = astropy_power(t.astype(np.float64), y.astype(np.float64), dy.astype(np.float64), f)
    if dtype == "float64":
        assert_power_close(power, ref, rtol_of_max=F64_RTOL_OF_MAX)
    else:
        assert_power_close(power, ref, atol=F32_ATOL)
