"""Astropy check of a server on a machine without Astropy (the GPU machine).

Here (Debian's /usr/bin/python3, with Astropy):
    astropy_fixture_check.py make FIXTURE.npz    # fresh random series + Astropy's power
There (any Python with grpcio and numpy, the gpucompute package on PYTHONPATH):
    astropy_fixture_check.py check FIXTURE.npz HOST:PORT
Checks, per series, every normalization and fit_mean/center_data/dy combination: float64
within 1e-9 of the peak power, float32 within 1e-4 absolute (standard normalization) or
1e-4 of the peak, and that the reported peak is the maximum within that tolerance.
Then, on fresh series of mixed lengths (the "complete" cases, issue 7's features): the fast
and direct methods on Astropy's automatic grid against Astropy's "slow" (float64 1e-9 of the
peak, float32 1e-4), nterms 2..4 against "chi2" where the normal matrix has cond < 1e6
(1e-8 of the peak, both methods), the baluev / davies / naive false-alarm probabilities of
three powers (rtol 1e-9) and levels of four probabilities (rtol 1e-6), the bootstrap's
probabilities at Astropy's bootstrap levels for 0.5 and 0.1 (400 resamplings each: within 5
sigma), model parameters and model values at the signal's frequency (rtol
1e-8), and the top-5 local maxima.
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
    make_complete(rng, out)
    np.savez(path, **out)
    print(f"wrote {path}: seed {seed}")


FAP_METHODS = ("baluev", "davies", "naive")
BOOTSTRAPS = 400
COMPLETE_CASES = 6


def make_complete(rng, out):
    """The complete cases' series and Astropy's answers, as c{i}/... entries of `out`."""
    from astropy.timeseries import LombScargle
    from astropy.timeseries.periodograms.lombscargle.implementations.mle import design_matrix
    for i in range(COMPLETE_CASES):
        n = int(rng.integers(50, 1200))
        base = float(rng.uniform(10, 200))
        t = np.sort(rng.uniform(0, base, n))
        f_signal = float(rng.uniform(5 / base, 2.0))
        dy = rng.uniform(0.2, 1.0, n)
        y = 2 * np.sin(2 * np.pi * f_signal * t + rng.uniform(0, 6.3)) + rng.normal(0, 1, n) * dy + 3
        c = f"c{i}"
        out[f"{c}/t"], out[f"{c}/y"], out[f"{c}/dy"] = t, y, dy
        out[f"{c}/f_signal"] = np.array(f_signal)
        ls = LombScargle(t, y, dy)
        freq, power = ls.autopower(method="slow")
        out[f"{c}/freq"], out[f"{c}/power"] = freq, power
        z = np.array([np.max(power), np.median(power), np.percentile(power, 99)])
        out[f"{c}/z"] = z
        for m in FAP_METHODS:
            out[f"{c}/fap/{m}"] = np.asarray(ls.false_alarm_probability(z, method=m))
            out[f"{c}/level/{m}"] = np.ravel(ls.false_alarm_level([0.001, 0.01, 0.1, 0.5], method=m))
        out[f"{c}/fap/bootstrap"] = np.array([0.5, 0.1])
        out[f"{c}/z_bootstrap"] = np.ravel(ls.false_alarm_level(
            [0.5, 0.1], method="bootstrap", method_kwds={"n_bootstraps": BOOTSTRAPS,
                                                        "random_seed": int(rng.integers(1 << 30))}))
        t_fit = np.linspace(t[0], t[-1], 7)
        out[f"{c}/t_fit"] = t_fit
        for q in (1, 2, 3, 4):
            lq = LombScargle(t, y, dy, nterms=q)
            out[f"{c}/params/{q}"] = lq.model_parameters(f_signal)
            out[f"{c}/model/{q}"] = lq.model(t_fit, f_signal)
            if q > 1:
                fq, pq = lq.autopower(method="chi2", minimum_frequency=1.0 / base)
                ok = np.ones(len(fq), bool)
                for k, f in enumerate(fq[:64]):  # only the lowest frequencies are ill-conditioned
                    x = design_matrix(t, f, dy, nterms=q)
                    ok[k] = np.linalg.cond(x.T @ x) < 1e6
                out[f"{c}/min_f/{q}"] = np.array(1.0 / base)
                out[f"{c}/power/{q}"], out[f"{c}/ok/{q}"] = pq, ok


def local_maxima(p, k):
    """The k highest local maxima (no neighbour larger; ties: the lower index), as the server."""
    left = np.concatenate([[-np.inf], p[:-1]])
    right = np.concatenate([p[1:], [-np.inf]])
    idx = np.nonzero((p > left) & (p >= right))[0]
    return np.array(sorted(idx, key=lambda i: (-p[i], i))[:k], dtype=np.int64)


def check_complete(data, client):
    """The complete cases (see the module's doc); returns (checks, failures)."""
    import gpucompute
    checks = failures = 0

    def report(ok, what):
        nonlocal checks, failures
        checks += 1
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}")

    i = 0
    while f"c{i}/t" in data:
        c = f"c{i}"
        t, y, dy = data[f"{c}/t"], data[f"{c}/y"], data[f"{c}/dy"]
        f_ref, p_ref = data[f"{c}/freq"], data[f"{c}/power"]
        peak = np.max(p_ref)
        for method in ("fast", "direct"):
            for dtype in ("float64", "float32"):
                (r,) = client.periodogram([(t, y, dy)], method=method, dtype=dtype, top_k=5)
                err = np.max(np.abs(r.power.astype(np.float64) - p_ref))
                tol = 1e-9 * peak if dtype == "float64" else 1e-4
                same_grid = len(r.frequency) == len(f_ref) and np.allclose(r.frequency, f_ref,
                                                                           rtol=1e-12)
                report(same_grid and r.method == method and err <= tol,
                       f"{c} n={len(t):4d} nterms 1 {method:6s} {dtype} max|err|={err:.2e} tol={tol:.1e}")
                if dtype == "float64":
                    got = np.array([p["index"] for p in r.peaks])
                    want = local_maxima(p_ref, 5)
                    # Near-equal maxima may swap: compare the powers at our indices.
                    ok = len(got) == len(want) and np.all(np.abs(p_ref[got] - p_ref[want]) <= tol)
                    report(ok, f"{c} top-5 {method} {got.tolist()} vs {want.tolist()}")
        for q in (2, 3, 4):
            pq, okq = data[f"{c}/power/{q}"], data[f"{c}/ok/{q}"]
            for method in ("fast", "direct"):
                (r,) = client.periodogram([(t, y, dy)], method=method, nterms=q,
                                          minimum_frequency=float(data[f"{c}/min_f/{q}"]))
                err = np.max(np.abs(r.power - pq)[okq]) if len(r.power) == len(pq) else np.inf
                report(err <= 1e-8 * np.max(pq),
                       f"{c} nterms {q} {method:6s} float64 max|err|={err:.2e} where cond < 1e6 "
                       f"({okq.sum()} of {len(okq)})")
        ls = gpucompute.LombScargle(t, y, dy, client=client)
        z = data[f"{c}/z"]
        for m in FAP_METHODS:
            fap = ls.false_alarm_probability(z, method=m)
            level = ls.false_alarm_level([0.001, 0.01, 0.1, 0.5], method=m)
            ok = (np.allclose(fap, data[f"{c}/fap/{m}"], rtol=1e-9, atol=1e-300)
                  and np.allclose(level, data[f"{c}/level/{m}"], rtol=1e-6))
            report(ok, f"{c} false alarm {m}: probabilities "
                        f"{np.array2string(np.asarray(fap), precision=4, max_line_width=300)}")
        zb, ref = data[f"{c}/z_bootstrap"], data[f"{c}/fap/bootstrap"]
        kw = {"n_bootstraps": BOOTSTRAPS, "random_seed": 7 + i}
        fap = ls.false_alarm_probability(zb, method="bootstrap", method_kwds=kw)
        # Two independent estimates of one probability from BOOTSTRAPS draws each.
        sigma = np.sqrt(2 * np.maximum(ref * (1 - ref), 1.0 / BOOTSTRAPS) / BOOTSTRAPS)
        report(bool(np.all(np.abs(fap - ref) <= 5 * sigma + 1e-12)),
               f"{c} false alarm bootstrap at Astropy's levels for {ref}: {np.asarray(fap)} (5 sigma {5 * sigma})")
        f_signal = float(data[f"{c}/f_signal"])
        for q in (1, 2, 3, 4):
            lq = gpucompute.LombScargle(t, y, dy, nterms=q, client=client)
            params = lq.model_parameters(f_signal)
            model = lq.model(data[f"{c}/t_fit"], f_signal)
            ok = (np.allclose(params, data[f"{c}/params/{q}"], rtol=1e-8, atol=1e-10)
                  and np.allclose(model, data[f"{c}/model/{q}"], rtol=1e-8, atol=1e-10))
            report(ok, f"{c} model nterms {q}: parameters "
                        f"{np.array2string(params, precision=5, max_line_width=300)}")
        i += 1
    return checks, failures


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
    checks, more = check_complete(data, client)
    total = i * 2 + checks
    failures += more
    print(f"{total - failures}/{total} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
