"""Astropy check of a server on a machine without Astropy (the GPU machine).

Here (Debian's /usr/bin/python3, with Astropy):
    astropy_fixture_check.py make FIXTURE.npz    # fresh random series + Astropy's power
There (any Python with grpcio and numpy, the gpucompute package on PYTHONPATH):
    astropy_fixture_check.py check FIXTURE.npz HOST:PORT
Checks, per series, every normalization and fit_mean/center_data/dy combination: float64
within 1e-9 of the peak power, float32 within 1e-4 absolute (standard normalization) or
1e-4 of the peak, and that the reported peak is the maximum within that tolerance.
"""
import sys

import numpy as np

NORMS = ("standard", "model", "log", "psd")


def cases(rng):
    """Yields (name, t, y, dy, frequency, options) with uneven sampling."""
    k = 0
    for norm in NORMS:
        for fit_mean in (True, False):
            for center in (True, False):
                for with_dy in (True, False):
                    n = int(rng.integers(30, 1500))
                    long_baseline = k % 5 == 0
                    base = 3000.0 if long_baseline else 10.0 + 90 * rng.random()
                    t = np.sort(rng.uniform(0, base, n)) + (2.45e6 if long_baseline else 0)
                    f_true = rng.uniform(0.2, 5.0)
                    y = (1.3 * np.sin(2 * np.pi * f_true * t + rng.uniform(0, 6.3))
                         + rng.normal(0, 0.5, n) + rng.normal(0, 3))
                    dy = rng.uniform(0.3, 1.5, n) if with_dy else None
                    df = 1.0 / base / 5
                    nf = 20000 if long_baseline else 4000
                    freq = 0.5 * df + df * np.arange(nf)
                    yield (f"{norm}/fit_mean={fit_mean}/center={center}/dy={with_dy}", t, y, dy,
                           freq, dict(normalization=norm, fit_mean=fit_mean, center_data=center))
                    k += 1


def make(path):
    from astropy.timeseries import LombScargle
    seed = int(np.random.default_rng().integers(1 << 31))
    rng = np.random.default_rng(seed)
    out = {"seed": np.array(seed)}
    for i, (name, t, y, dy, freq, opts) in enumerate(cases(rng)):
        # The power is invariant to a time shift; Astropy gets t - t[0] so that its own float64
        # phases stay accurate on Julian-date-like times (the server gets t as it is).
        ls = LombScargle(t - t[0], y, dy, fit_mean=opts["fit_mean"], center_data=opts["center_data"],
                         normalization=opts["normalization"])
        out[f"{i}/name"] = np.array(name)
        out[f"{i}/t"], out[f"{i}/y"], out[f"{i}/freq"] = t, y, freq
        if dy is not None:
            out[f"{i}/dy"] = dy
        out[f"{i}/power"] = ls.power(freq, method="cython")
    np.savez(path, **out)
    print(f"wrote {path}: seed {seed}")


def check(path, target):
    import gpucompute
    data = np.load(path)
    client = gpucompute.Client(target, timeout=120)
    print(f"server backend: {client.server_info()['backend']}; fixture seed {int(data['seed'])}")
    failures = 0
    i = 0
    while f"{i}/name" in data:
        name = str(data[f"{i}/name"])
        norm, fit, center, _ = name.split("/")
        t, y, freq, ref = data[f"{i}/t"], data[f"{i}/y"], data[f"{i}/freq"], data[f"{i}/power"]
        dy = data[f"{i}/dy"] if f"{i}/dy" in data else None
        peak = np.max(np.abs(ref))
        # Even cases as a uniform grid (the server's fast path), odd ones as an explicit list.
        grid = (gpucompute.UniformGrid(freq[0], freq[1] - freq[0], len(freq)) if i % 2 == 0
                else freq)
        if i % 2 == 0:
            freq_used = grid.f0 + grid.df * np.arange(grid.n)
            assert np.allclose(freq_used, freq, rtol=1e-12, atol=0)
        for dtype in ("float64", "float32"):
            series = (t, y) if dy is None else (t, y, dy)
            r = client.periodogram([series], frequency=grid, normalization=norm,
                                   fit_mean=fit.endswith("True"),
                                   center_data=center.endswith("True"), dtype=dtype)[0]
            err = np.max(np.abs(r.power.astype(np.float64) - ref))
            if dtype == "float64":
                tol = 1e-9 * peak
            else:
                tol = 1e-4 if norm == "standard" else 1e-4 * peak
            ok = err <= tol and not np.isnan(r.power).any() and ref[r.peak_index] >= ref.max() - tol
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name:45s} {dtype} n={len(t):5d} nf={len(freq):6d} "
                  f"max|err|={err:.2e} tol={tol:.1e}")
        i += 1
    print(f"{i * 2 - failures}/{i * 2} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
