"""A plain NumPy LETKF (a loop over state variables: distances, taper, the local ETKF by
numpy.linalg.eigh), the reference of tests/python/test_letkf.py and of the Gaspari-Cohn taper
in tests/bench/letkf_bench.py, and the relaxation (RTPP, RTPS) of every filter's reference. The conventions are the server's (docs/python.md "Localised
analysis (LETKF)"): DAPPER's radius, an observation enters when its coefficient exceeds 1e-3."""

import numpy as np


def taper(d, radius, kind):
    if kind == "gaussian":
        return np.exp(-0.5 * (d / radius) ** 2)
    if kind == "step":
        return (d <= radius).astype(float)
    r = d / (1.82 * radius)  # Gaspari & Cohn (1999) eq. 4.10, half-width 1.82 radius
    c = np.zeros_like(r)
    a, b = r <= 1, (r > 1) & (r < 2)
    c[a] = 1 - 5 / 3 * r[a] ** 2 + 5 / 8 * r[a] ** 3 + 1 / 2 * r[a] ** 4 - 1 / 4 * r[a] ** 5
    rb = r[b]
    c[b] = rb ** 5 / 12 - rb ** 4 / 2 + 5 / 8 * rb ** 3 + 5 / 3 * rb ** 2 - 5 * rb + 4 - 2 / (3 * rb)
    return c


def distances(point, obs, metric, domain=None, earth_radius=None):
    if metric == "great_circle":
        lon1, lat1 = np.radians(point)
        lon2, lat2 = np.radians(obs[:, 0]), np.radians(obs[:, 1])
        h = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
        return 2 * earth_radius * np.arcsin(np.sqrt(np.clip(h, 0, 1)))
    diff = np.abs(obs - point)
    if metric == "periodic":
        diff = np.mod(diff, domain)
        diff = np.minimum(diff, domain - diff)
    return np.sqrt((diff ** 2).sum(axis=1))


def letkf_reference(X, HX, y, r, state_coords, obs_coords, radius, kind, metric, domain=None,
                    earth_radius=None, inflation=1.0, rtpp=0.0, rtps=0.0):
    N = X.shape[1]
    xbar = X.mean(axis=1, keepdims=True)
    A = inflation * (X - xbar)
    ybar = HX.mean(axis=1, keepdims=True)
    Y = inflation * (HX - ybar)
    d = y - ybar[:, 0]
    Xa = np.empty_like(X)
    for i in range(X.shape[0]):
        c = taper(distances(state_coords[i], obs_coords, metric, domain, earth_radius), radius, kind)
        near = c > 1e-3
        if not near.any():
            Xa[i] = xbar[i, 0] + A[i]
            continue
        rinv = c[near] / r[near]  # tapered inverse variances
        Yl = Y[near]
        G = (N - 1) * np.eye(N) + Yl.T @ (rinv[:, None] * Yl)
        g, V = np.linalg.eigh(G)
        wbar = V @ ((V.T @ (Yl.T @ (rinv * d[near]))) / g)
        W = V @ np.diag(np.sqrt((N - 1) / g)) @ V.T
        Xa[i] = xbar[i, 0] + A[i] @ (wbar[:, None] + W)
    return relax(Xa, A, rtpp, rtps)


def relax(Xa, A, rtpp=0.0, rtps=0.0):
    """Relaxation of the analysis anomalies toward the (inflated) forecast ones A: RTPP mixes the
    anomalies, RTPS scales them so that each row's spread moves toward the forecast's (also the
    global filters' reference, tests/python/test_assimilate.py)."""
    if rtpp == 0 and rtps == 0:
        return Xa
    mean = Xa.mean(axis=1, keepdims=True)
    ana = Xa - mean
    ana = (1 - rtpp) * ana + rtpp * A
    if rtps > 0:
        ratio = np.sqrt((A ** 2).sum(axis=1, keepdims=True) / (ana ** 2).sum(axis=1, keepdims=True))
        ana = (1 - rtps + rtps * ratio) * ana
    return mean + ana
