"""Issue 7's periodogram features against Astropy (float64 references), on fresh random
series of mixed lengths: the fast (NUFFT) method against the direct sum and Astropy,
multi-harmonic models (Astropy's chi2), false-alarm probabilities and levels by all four
methods, best-fit model parameters and values, and top-k peaks.

Tolerances: float64 powers within 1e-9 of the reference's peak; float32 within 1e-4 absolute
(standard normalization). Multi-harmonic powers are compared where the normal equations
are well conditioned: at the lowest frequencies of a grid the normal equations of
nterms >= 2 are ill-conditioned and neither Astropy's float64 nor ours is accurate there
(both solve them). The power's error is about cond(X^T X) times the error of the harmonic
sums: rounding (~1e-16) for the direct sums, the NUFFT's ~1e-14 for the fast ones. So the
1e-8 bound holds below cond 1e8 for direct and below 1e6 for fast (measured on 39 random
series x nterms 2..4: worst 2.3e-10 and 1.1e-9 of the peak; fast reached 5.8e-8 between
cond 1e7 and 1e8).
"""

import numpy as np
import pytest
from astropy.timeseries import LombScargle

import gpucompute

from series_util import make_series

NORMALIZATIONS = ["standard", "model", "log", "psd"]


def mixed_series(rng, count=4, with_dy=True):
    """Series of different lengths (50..400) and baselines."""
    return [make_series(rng, with_dy=with_dy) for _ in range(count)]


def astropy_autopower(t, y, dy, *, nterms=1, normalization="standard", **grid):
    ls = LombScargle(t, y, dy, nterms=nterms, normalization=normalization)
    return ls.autopower(method="chi2" if nterms > 1 else "slow", **grid)


def well_conditioned(t, dy, freqs, nterms, limit=1e8):
    """Mask of the frequencies whose normal matrix has cond < limit."""
    from astropy.timeseries.periodograms.lombscargle.implementations.mle import design_matrix
    out = np.ones(len(freqs), bool)
    for i, f in enumerate(freqs[:64]):  # only the lowest frequencies are ill-conditioned
        X = design_matrix(t, f, dy, nterms=nterms)
        out[i] = np.linalg.cond(X.T @ X) < limit
    return out


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_fast_matches_direct_and_astropy_float64(client, rng, normalization):
    series = mixed_series(rng)
    items = [(t, y, dy) for t, y, dy, _ in series]
    fast = client.periodogram(items, method="fast", normalization=normalization)
    direct = client.periodogram(items, method="direct", normalization=normalization)
    for (t, y, dy, _), rf, rd in zip(series, fast, direct):
        assert rf.method == "fast" and rd.method == "direct"
        f_ref, p_ref = astropy_autopower(t, y, dy, normalization=normalization)
        np.testing.assert_array_equal(rf.frequency, f_ref)
        scale = np.max(p_ref)
        assert np.max(np.abs(rf.power - rd.power)) <= 1e-9 * scale, "fast vs direct"
        assert np.max(np.abs(rf.power - p_ref)) <= 1e-9 * scale, "fast vs Astropy"


def test_fast_float32_within_1e4(client, rng):
    series = mixed_series(rng)
    items = [(t, y, dy) for t, y, dy, _ in series]
    fast = client.periodogram(items, method="fast", dtype="float32")
    for (t, y, dy, _), r in zip(series, fast):
        assert r.power.dtype == np.float32
        _, p_ref = astropy_autopower(t, y, dy)
        assert np.max(np.abs(r.power - p_ref)) <= 1e-4


def test_auto_picks_fast_for_large_and_direct_for_small_or_explicit(client, rng):
    t, y, dy, _ = make_series(rng, n=2000, baseline=100)
    (big,) = client.periodogram([(t, y, dy)], nyquist_factor=20)
    assert big.method == "fast"
    t, y, dy, _ = make_series(rng, n=20)
    (small,) = client.periodogram([(t, y, dy)])
    assert small.method == "direct"
    (explicit,) = client.periodogram([(t, y, dy)], np.linspace(0.01, 1, 100))
    assert explicit.method == "direct"


@pytest.mark.parametrize("nterms", [1, 2, 3, 4])
@pytest.mark.parametrize("method", ["direct", "fast"])
def test_nterms_matches_astropy_chi2(client, rng, nterms, method):
    series = mixed_series(rng, count=3)
    items = [(t, y, dy) for t, y, dy, _ in series]
    results = client.periodogram(items, method=method, nterms=nterms)
    for (t, y, dy, _), r in zip(series, results):
        ls = LombScargle(t, y, dy, nterms=nterms)
        f_ref = ls.autofrequency()  # autopower's grid
        np.testing.assert_array_equal(r.frequency, f_ref)
        ok = well_conditioned(t, dy, f_ref, nterms, limit=1e8 if method == "direct" else 1e6)
        assert len(ok) <= 64 or ok[63], "ill-conditioned beyond the bins well_conditioned checks"
        # Astropy's reference only there too: at the lowest frequencies its solve of normal
        # equations singular to working precision may raise LinAlgError rather than return.
        p_ref = ls.power(f_ref[ok], method="chi2" if nterms > 1 else "slow")
        diff = np.abs(r.power[ok] - p_ref)
        assert not np.isnan(diff).any(), "NaN where the system is well conditioned"
        assert np.max(diff) <= 1e-8 * np.max(p_ref), f"nterms={nterms} {method}"


def test_singular_system_gives_nan_not_error(client):
    # Integer times: at f = 1 every sin(2 pi f t) vanishes and the system is singular.
    t = np.arange(40, dtype=np.float64)
    y = np.cos(2 * np.pi * 0.13 * t)
    for nterms in (1, 2):
        (r,) = client.periodogram([(t, y)], [0.13, 1.0, 0.37], nterms=nterms, method="direct")
        assert np.isnan(r.power[1]) and np.isfinite(r.power[[0, 2]]).all()
        assert r.peak_index == 0


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("method", ["baluev", "davies", "naive"])
def test_false_alarm_matches_astropy(client, rng, normalization, method):
    t, y, dy, _ = make_series(rng)
    ours = client.lomb_scargle(t, y, dy, normalization=normalization)
    ref = LombScargle(t, y, dy, normalization=normalization)
    _, p = astropy_autopower(t, y, dy, normalization=normalization)  # not Astropy's 1% "fast"
    z = np.array([np.max(p), np.median(p), np.percentile(p, 99)])
    np.testing.assert_allclose(ours.false_alarm_probability(z, method=method),
                               ref.false_alarm_probability(z, method=method),
                               rtol=1e-9, atol=1e-300)
    probs = np.array([0.001, 0.01, 0.1, 0.5])
    np.testing.assert_allclose(ours.false_alarm_level(probs, method=method),
                               np.ravel(ref.false_alarm_level(probs, method=method)),
                               rtol=1e-6)
    # The peak's own probability comes back with every periodogram that asks for it: Astropy's
    # at our peak power (the power's own accuracy is tested above; at probabilities of 1e-190
    # (log normalization) a 1e-10 change of the peak moves the probability by 2e-8).
    (r,) = client.periodogram([(t, y, dy)], normalization=normalization,
                              false_alarm={"method": method})
    assert abs(r.peak_power - np.max(p)) <= 1e-9 * np.max(p)
    np.testing.assert_allclose(r.false_alarm["peak_probability"],
                               ref.false_alarm_probability(r.peak_power, method=method),
                               rtol=1e-8, atol=1e-300)


def test_false_alarm_bootstrap_is_statistically_astropys(client, rng):
    t, y, dy, _ = make_series(rng, n=120)
    ours = client.lomb_scargle(t, y, dy)
    ref = LombScargle(t, y, dy)
    _, p = ref.autopower()
    z = np.percentile(p, [99.9, 99.99]) * np.array([1.5, 2.0])
    n = 400
    kw = {"n_bootstraps": n, "random_seed": int(rng.integers(1 << 30))}
    fap = ours.false_alarm_probability(z, method="bootstrap", method_kwds=kw)
    fap_ref = ref.false_alarm_probability(z, method="bootstrap", method_kwds=kw)
    # Two independent estimates of one probability from n draws each: 5 sigma apart at most.
    sigma = np.sqrt(2 * np.maximum(fap_ref * (1 - fap_ref), 1.0 / n) / n)
    assert np.all(np.abs(fap - fap_ref) <= 5 * sigma + 1e-12), (fap, fap_ref)
    # Same seed, same numbers; the level at p is the (1 - p) quantile of the maxima.
    np.testing.assert_array_equal(
        fap, ours.false_alarm_probability(z, method="bootstrap", method_kwds=kw))
    level = ours.false_alarm_level(0.1, method="bootstrap", method_kwds=kw)
    level_ref = ref.false_alarm_level(0.1, method="bootstrap", method_kwds=kw)
    assert abs(level - level_ref) <= 0.25 * level_ref


@pytest.mark.parametrize("nterms", [1, 2, 3])
@pytest.mark.parametrize("fit_mean,center_data", [(True, True), (False, True), (True, False)])
def test_model_parameters_and_model_match_astropy(client, rng, nterms, fit_mean, center_data):
    t, y, dy, f_signal = make_series(rng, offset=float(rng.uniform(0, 5e4)))
    opts = dict(nterms=nterms, fit_mean=fit_mean, center_data=center_data)
    ours = client.lomb_scargle(t, y, dy, **opts)
    ref = LombScargle(t, y, dy, **opts)
    t_fit = np.linspace(t.min(), t.max(), 37)
    np.testing.assert_allclose(ours.model_parameters(f_signal), ref.model_parameters(f_signal),
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.model(t_fit, f_signal), ref.model(t_fit, f_signal),
                               rtol=1e-7, atol=1e-9)
    assert ours.offset() == pytest.approx(ref.offset(), rel=1e-12)


def test_models_in_a_batch_default_to_each_peak(client, rng):
    series = mixed_series(rng, count=3)
    items = [{"t": t, "y": y, "dy": dy} for t, y, dy, _ in series]
    items[1]["model"] = {"t": series[1][0][:10]}
    results = client.periodogram(items, model_parameters=True)
    for (t, y, dy, _), item, r in zip(series, items, results):
        ref = LombScargle(t, y, dy)
        assert r.model["frequency"] == r.peak_frequency
        np.testing.assert_allclose(r.model["parameters"], ref.model_parameters(r.peak_frequency),
                                   rtol=1e-7, atol=1e-9)
        if "model" in item:
            np.testing.assert_allclose(r.model["y"], ref.model(t[:10], r.peak_frequency),
                                       rtol=1e-7, atol=1e-9)
        else:
            assert r.model["y"] is None


def local_maxima_reference(p, k):
    """Indices of the k highest local maxima (no neighbour larger; a plateau's first index)."""
    left = np.concatenate([[-np.inf], p[:-1]])
    right = np.concatenate([p[1:], [-np.inf]])
    idx = np.nonzero((p > left) & (p >= right))[0]
    order = sorted(idx, key=lambda i: (-p[i], i))
    return np.array(order[:k], dtype=np.int64)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_top_k_peaks(client, rng, dtype):
    series = mixed_series(rng)
    items = [(t, y, dy) for t, y, dy, _ in series]
    results = client.periodogram(items, top_k=5, dtype=dtype, method="direct")
    for r in results:
        want = local_maxima_reference(r.power, 5)
        got = np.array([p["index"] for p in r.peaks])
        np.testing.assert_array_equal(got, want)
        assert r.peaks[0]["index"] == r.peak_index
        for p in r.peaks:
            assert p["power"] == pytest.approx(float(r.power[p["index"]]))
            assert p["frequency"] == pytest.approx(r.frequency[p["index"]], rel=1e-15)


def test_bad_options_are_invalid_argument(client, rng):
    import grpc
    t, y, dy, _ = make_series(rng)
    cases = [
        (dict(nterms=9), "nterms"),
        (dict(top_k=-1), "top_k"),
        (dict(method="fast", frequency=np.linspace(0.1, 1, 10)), "method"),
        (dict(nterms=2, false_alarm="baluev"), "false_alarm"),
        (dict(false_alarm={"method": "baluev", "probabilities": [1.5]}), "false_alarm.probabilities"),
        (dict(fit_mean=False, center_data=False, false_alarm="naive"), "false_alarm"),
    ]
    for kwargs, field in cases:
        frequency = kwargs.pop("frequency", None)
        with pytest.raises(grpc.RpcError) as e:
            client.periodogram([(t, y, dy)], frequency, **kwargs)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, kwargs
        assert field in e.value.details(), e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        client.periodogram([(t, y, dy)], false_alarm={"method": "bootstrap",
                                                       "n_bootstraps": 1 << 30})
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "n_bootstraps" in e.value.details()
    # ... and the server keeps serving.
    (r,) = client.periodogram([(t, y, dy)], top_k=1)
    assert r.peaks[0]["index"] == r.peak_index


@pytest.mark.parametrize("frequency", ["auto", "uniform", "explicit"])
@pytest.mark.parametrize("output", [None, "discard"])
def test_packed_series_with_columns_give_what_series_give(client, rng, frequency, output):
    """Arrays go packed and their results come back as columns (PeriodogramColumns); dicts go
    one Series each with one SeriesResult each. Both give the same results, field by field:
    grids, peaks (fewer maxima than top_k included), false-alarm values and models."""
    series = mixed_series(rng, count=6)
    series.append(make_series(rng, 5, baseline=1.0, f_signal=1.0))  # fewer maxima than top_k
    arrays = [(t, y, dy) for t, y, dy, _ in series]
    dicts = [dict(t=t, y=y, dy=dy) for t, y, dy in arrays]
    assert gpucompute.client._packed_series(arrays) is not None
    assert gpucompute.client._packed_series(dicts) is None
    grid = {"auto": None, "uniform": gpucompute.UniformGrid(0.05, 0.01, 300),
            "explicit": np.sort(rng.uniform(0.05, 3.0, 200))}[frequency]
    options = dict(top_k=25, model_parameters=True, output=output,
                   false_alarm={"method": "baluev", "probabilities": [0.01, 0.1],
                                "powers": [0.2, 0.5, 0.9]})
    packed = client.periodogram(arrays, grid, **options)
    plain = client.periodogram(dicts, grid, **options)
    assert len(packed) == len(plain) == len(series)
    for p, q in zip(packed, plain):
        assert (p.peak_frequency, p.peak_power, p.peak_index, p.method, p.grid) == \
            (q.peak_frequency, q.peak_power, q.peak_index, q.method, q.grid)
        np.testing.assert_array_equal(p.frequency, q.frequency)
        assert p.peaks == q.peaks
        assert p.false_alarm["peak_probability"] == q.false_alarm["peak_probability"]
        np.testing.assert_array_equal(p.false_alarm["probabilities"], q.false_alarm["probabilities"])
        np.testing.assert_array_equal(p.false_alarm["levels"], q.false_alarm["levels"])
        assert p.model["frequency"] == q.model["frequency"]
        np.testing.assert_array_equal(p.model["parameters"], q.model["parameters"])
        if output == "discard":
            assert p.power is None and q.power is None
        else:
            np.testing.assert_array_equal(p.power, q.power)
    assert len(packed[-1].peaks) < 25
