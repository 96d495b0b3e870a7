"""Random unevenly sampled series, Astropy references and comparison helpers for the tests."""

import numpy as np
from astropy.timeseries import LombScargle


def make_series(rng, n=None, *, baseline=None, offset=0.0, with_dy=True, f_signal=None):
    """A noisy sinusoid at sorted uniform-random times.

    Returns ``(t, y, dy, f_signal)``: n samples (50..400 when None) over ``[offset,
    offset + baseline]`` (baseline 10..200 when None), amplitude 1.5..3 at ``f_signal`` cycles per
    unit of t (a few per baseline .. 2 when None) plus a mean and Gaussian noise of scale dy.
    dy is None unless ``with_dy``.
    """
    n = int(rng.integers(50, 401)) if n is None else n
    baseline = float(rng.uniform(10, 200)) if baseline is None else baseline
    if f_signal is None:
        f_signal = float(rng.uniform(5 / baseline, 2.0))
    t = offset + np.sort(rng.uniform(0, baseline, n))
    dy = rng.uniform(0.2, 1.0, n) if with_dy else None
    noise = rng.normal(0, 1, n) * (dy if with_dy else 0.5)
    y = (rng.uniform(-5, 5) + rng.uniform(1.5, 3) * np.sin(2 * np.pi * f_signal * (t - offset)
         + rng.uniform(0, 2 * np.pi)) + noise)
    return t, y, dy, f_signal


def frequency_grid(rng, t, f_signal, m=None):
    """Explicit frequencies: ``m`` (200..1000) sorted random points in (0, 1.3 f_signal] and a
    band of 50 around f_signal, so that the signal's peak is resolved."""
    m = int(rng.integers(200, 1001)) if m is None else m
    baseline = t.max() - t.min()
    wide = rng.uniform(0.2 / baseline, 1.3 * f_signal, m - 50)
    band = f_signal + np.linspace(-2, 2, 50) / baseline
    return np.sort(np.concatenate([wide, band[band > 0]]))


def astropy_power(t, y, dy, f, *, fit_mean=True, center_data=True, normalization="standard",
                  method="slow"):
    """Astropy's float64 power at frequencies f (t shifted to start at 0: shift-invariant)."""
    ls = LombScargle(t - t[0], y, dy, fit_mean=fit_mean, center_data=center_data,
                     normalization=normalization)
    return ls.power(f, method=method)


def assert_power_close(ours, ref, *, rtol_of_max=None, atol=None, context=""):
    """Checks ``max|ours - ref| <= tol`` and that both peak in the same bin (or a tie).

    tol is ``rtol_of_max * max(ref)`` or ``atol``. A different argmax passes only when the two
    peaks' reference powers differ by no more than tol (a numerical tie).
    """
    ours = np.asarray(ours, dtype=np.float64)
    assert ours.shape == ref.shape, f"{context}: shape {ours.shape} != {ref.shape}"
    assert np.all(np.isfinite(ours)), f"{context}: non-finite power at {np.flatnonzero(~np.isfinite(ours))[:10]}"
    tol = rtol_of_max * np.max(np.abs(ref)) if rtol_of_max is not None else atol
    err = np.abs(ours - ref)
    worst = int(np.argmax(err))
    assert err[worst] <= tol, (
        f"{context}: max |ours - ref| = {err[worst]:.3e} > {tol:.3e} at bin {worst} "
        f"(ours {ours[worst]!r}, ref {ref[worst]!r}, ref max {np.max(ref)!r})")
    i, j = int(np.argmax(ours)), int(np.argmax(ref))
    assert i == j or abs(ref[i] - ref[j]) <= tol, (
        f"{context}: peak bin {i} (ref power {ref[i]!r}) != reference peak bin {j} "
        f"(ref power {ref[j]!r})")
