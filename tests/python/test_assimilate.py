"""Assimilate through a live server against NumPy/SciPy float64 references written here from
the textbook formulas, on fresh random inputs (seed printed by the ``rng`` fixture).

References (independent of the server's algebra: explicit gains, R^-1 instead of whitening,
scipy.linalg.sqrtm instead of an eigendecomposition):
  stochastic EnKF: Xa = Xf + Cxy (Cyy + R)^-1 (y 1^T + E - HXf), Cxy, Cyy sample covariances
                   of the inflated forecast anomalies (N - 1);
  ETKF:            Pw = ((N-1) I + Y^T R^-1 Y)^-1, w = Pw Y^T R^-1 (y - ybar),
                   Xa = xbar 1^T + A (w 1^T + sqrtm((N-1) Pw)).
"""

import os

import grpc
import numpy as np
import pytest
import scipy.linalg

import gpucompute
from conftest import client_of_server
from letkf_numpy import relax
from rpc_util import expect_rpc_error
from gpucompute.v1 import compute_pb2, tensor_pb2

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


# ---------------------------------------------------------------------- references

def anomalies(E, inflation):
    mean = E.mean(axis=1, keepdims=True)
    return mean, inflation * (E - mean)


def enkf_reference(X, HX, y, R, E, inflation=1.0):
    N = X.shape[1]
    xbar, A = anomalies(X, inflation)
    ybar, Y = anomalies(HX, inflation)
    cxy = A @ Y.T / (N - 1)
    cyy = Y @ Y.T / (N - 1)
    innovations = y[:, None] + E - (ybar + Y)
    return xbar + A + cxy @ np.linalg.solve(cyy + R, innovations)


def etkf_reference(X, HX, y, R, inflation=1.0):
    N = X.shape[1]
    xbar, A = anomalies(X, inflation)
    ybar, Y = anomalies(HX, inflation)
    rinv = np.linalg.inv(R)
    pw = np.linalg.inv((N - 1) * np.eye(N) + Y.T @ rinv @ Y)
    w = pw @ Y.T @ rinv @ (y - ybar[:, 0])
    W = np.real(scipy.linalg.sqrtm((N - 1) * pw))
    return xbar + A @ (w[:, None] + W)


def kalman(X, H, y, R, inflation=1.0):
    """Mean and covariance of the Kalman update of the inflated prior sample moments."""
    N = X.shape[1]
    xbar, A = anomalies(X, inflation)
    P = A @ A.T / (N - 1)
    K = P @ H.T @ np.linalg.inv(H @ P @ H.T + R)
    mean = xbar[:, 0] + K @ (y - H @ xbar[:, 0])
    return mean, (np.eye(len(mean)) - K @ H) @ P


def random_problem(rng, n, m, N, full_r):
    """Linear H, an ensemble with some structure, and R diagonal or correlated SPD."""
    X = rng.normal(3, 1, (n, 1)) + rng.standard_normal((n, N)) @ np.diag(rng.uniform(0.5, 2, N))
    H = rng.standard_normal((m, n)) / np.sqrt(n)
    y = rng.normal(0, 3, m)
    var = rng.uniform(0.5, 1.5, m)
    if full_r:
        B = rng.standard_normal((m, m + 3))
        C = B @ B.T + 0.5 * (m + 3) * np.eye(m)
        d = np.sqrt(np.diag(C))
        R = C / np.outer(d, d) * np.sqrt(np.outer(var, var))
    else:
        R = np.diag(var)
    return X, H, H @ X, y, R


def rel(a, b):
    assert np.all(np.isfinite(a)), "non-finite values in the server's result"
    return np.linalg.norm(a - b) / np.linalg.norm(b)


SHAPES = [(30, 12, 8), (12, 30, 10), (20, 20, 20), (5, 9, 2), (40, 40, 24), (7, 3, 25)]
FORMS = ["auto", "observation_space", "ensemble_space"]


# ---------------------------------------------------------------------- accuracy

@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("full_r", [False, True], ids=["variances", "covariance"])
def test_enkf_with_client_perturbations(client, rng, form, full_r):
    for n, m, N in SHAPES:
        X, _, HX, y, R = random_problem(rng, n, m, N, full_r)
        E = rng.standard_normal((m, N)) * np.sqrt(np.diag(R))[:, None]
        inflation = float(rng.uniform(1.0, 1.2))
        obs_error = R if full_r else np.diag(R)
        Xa = client.assimilate(X, HX, y, obs_error=obs_error, method="enkf", perturbations=E,
                               inflation=inflation, form=form)
        assert Xa.dtype == np.float64 and Xa.shape == (n, N)
        assert rel(Xa, enkf_reference(X, HX, y, R, E, inflation)) < 1e-10, (n, m, N)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("full_r", [False, True], ids=["variances", "covariance"])
def test_etkf(client, rng, form, full_r):
    for n, m, N in SHAPES:
        X, H, HX, y, R = random_problem(rng, n, m, N, full_r)
        inflation = float(rng.uniform(1.0, 1.2))
        res = client.assimilate(X, HX, y, obs_error=R if full_r else np.diag(R), method="etkf",
                                inflation=inflation, form=form, return_diagnostics=True)
        Xa = res.analysis
        assert rel(Xa, etkf_reference(X, HX, y, R, inflation)) < 1e-10, (n, m, N)
        # Linear H: the mean and sample covariance are the Kalman update's.
        mean, cov = kalman(X, H, y, R, inflation)
        assert np.max(np.abs(Xa.mean(axis=1) - mean)) < 1e-10 * max(1, np.abs(mean).max())
        assert np.max(np.abs(np.cov(Xa, ddof=1) - cov)) < 1e-10 * max(1, np.abs(cov).max())
        # Diagnostics.
        np.testing.assert_allclose(res.innovation_mean, y - HX.mean(axis=1), rtol=0, atol=1e-12)
        spread = np.sqrt(np.mean(Xa.var(axis=1, ddof=1)))
        assert abs(res.analysis_spread - spread) < 1e-12 * max(1, spread)
        if form != "auto":
            assert res.form == form


def test_enkf_with_server_perturbations(client, rng):
    """Server-drawn perturbations are centred (the analysis mean is the Kalman mean), scaled
    to R, and a pure function of (seed, problem position)."""
    n, m, N = 15, 10, 400
    X, H, HX, y, R = random_problem(rng, n, m, N, True)
    a = client.assimilate(X, HX, y, obs_error=R, method="enkf", seed=11)
    b = client.assimilate(X, HX, y, obs_error=R, method="enkf", seed=11)
    c = client.assimilate(X, HX, y, obs_error=R, method="enkf", seed=12)
    assert np.array_equal(a, b)
    assert rel(a, c) > 1e-3
    mean, cov = kalman(X, H, y, R)
    assert np.max(np.abs(a.mean(axis=1) - mean)) < 1e-10 * np.abs(mean).max()
    # Scaled to R: the stochastic filter's analysis covariance is the Kalman one in
    # expectation (a check of the scale; the exact mapping E = L Z is tested in C++,
    # assimilate_cpu_test SeedDrawnPerturbationsAreLTimesCentredNormals).
    got = np.cov(a, ddof=1)
    assert np.linalg.norm(got - cov) / np.linalg.norm(cov) < 0.2
    # The same problem in second position of a batch draws other numbers. (In a batch the GPU
    # may take batched library routines, so the first problem equals `a` to rounding, not bit
    # for bit.)
    first, second = client.assimilate_batch(
        [dict(X=X, HX=HX, y=y, obs_error=R, method="enkf", seed=11)] * 2)
    assert rel(first, a) < 1e-12 and rel(second, a) > 1e-3


@pytest.mark.parametrize("method", ["etkf", "enkf"])
def test_float32_within_1e4_of_the_float64_reference(client, rng, method):
    for n, m, N in [(40, 40, 20), (60, 25, 16), (10, 30, 12)]:
        X, _, HX, y, R = random_problem(rng, n, m, N, False)
        E = rng.standard_normal((m, N)) * np.sqrt(np.diag(R))[:, None]
        want = (etkf_reference(X, HX, y, R, 1.05) if method == "etkf"
                else enkf_reference(X, HX, y, R, E, 1.05))
        kw = dict(perturbations=E) if method == "enkf" else {}
        Xa = client.assimilate(X.astype(np.float32), HX.astype(np.float32), y, np.diag(R),
                               method=method, inflation=1.05, dtype="float32", **kw)
        assert Xa.dtype == np.float32
        # Inputs rounded to float32 are part of the error budget.
        assert rel(Xa.astype(np.float64), want) < 1e-4, (method, n, m, N)


@pytest.mark.parametrize("kind", ["rtpp", "rtps"])
@pytest.mark.parametrize("method", ["etkf", "enkf"])
def test_relaxation(client, rng, kind, method):
    X, _, HX, y, R = random_problem(rng, 25, 18, 12, False)
    E = rng.standard_normal((18, 12))
    alpha = float(rng.uniform(0.2, 0.9))
    base = (etkf_reference(X, HX, y, R, 1.1) if method == "etkf"
            else enkf_reference(X, HX, y, R, E, 1.1))
    want = relax(base, anomalies(X, 1.1)[1], **{kind: alpha})
    kw = dict(perturbations=E) if method == "enkf" else {}
    Xa = client.assimilate(X, HX, y, np.diag(R), method=method, inflation=1.1,
                           **{kind: alpha}, **kw)
    assert rel(Xa, want) < 1e-10


def test_batch_of_mixed_problems_keeps_order(client, rng):
    problems, wants = [], []
    for i in range(12):
        n, m, N = int(rng.integers(1, 30)), int(rng.integers(1, 30)), int(rng.integers(2, 20))
        X, _, HX, y, R = random_problem(rng, n, m, N, bool(i % 2))
        obs_error = R if i % 2 else np.diag(R)
        if i % 3 == 0:
            E = rng.standard_normal((m, N))
            problems.append(dict(X=X, HX=HX, y=y, obs_error=obs_error, method="enkf",
                                 perturbations=E))
            wants.append(enkf_reference(X, HX, y, R, E))
        else:
            problems.append((X, HX, y, obs_error))
            wants.append(etkf_reference(X, HX, y, R))
    got = client.assimilate_batch(problems)
    assert len(got) == len(wants)
    for i, (g, w) in enumerate(zip(got, wants)):
        assert g.shape == w.shape and rel(g, w) < 1e-9, i


def test_scalar_obs_error_is_a_variance_for_every_observation(client, rng):
    X, _, HX, y, _ = random_problem(rng, 8, 6, 5, False)
    np.testing.assert_array_equal(client.assimilate(X, HX, y, 0.7),
                                  client.assimilate(X, HX, y, np.full(6, 0.7)))


# ---------------------------------------------------------------------- errors

def _good(rng):
    X, _, HX, y, R = random_problem(rng, 6, 4, 5, False)
    return X, HX, y, np.diag(R)


def _served(client, rng):
    X, HX, y, r = _good(rng)
    assert client.assimilate(X, HX, y, r).shape == X.shape


def test_bad_input_gets_a_precise_status_and_the_next_request_is_served(client, rng):
    X, HX, y, r = _good(rng)
    cases = [
        (lambda: client.assimilate(X, HX[:, :4], y, r),
         r"problems\[0\]\.hx\.shape\[1\] is 4 but x\.shape\[1\] \(members\) is 5"),
        (lambda: client.assimilate(X, HX, y[:3], r),
         r"problems\[0\]\.y\.shape\[0\] is 3 but hx\.shape\[0\] \(observations\) is 4"),
        (lambda: client.assimilate(X[:, :1], HX[:, :1], y, r),
         r"problems\[0\]\.x\.shape\[1\]: the ensemble needs at least 2 members \(got 1\)"),
        (lambda: client.assimilate(X, HX, y, np.array([[1.0, 2, 0, 0], [2, 1, 0, 0],
                                                          [0, 0, 1, 0], [0, 0, 0, 1]])),
         r"problems\[0\]\.obs_error: the covariance R is not positive definite"),
        (lambda: client.assimilate(X, HX, y, np.array([1.0, -1, 1, 1])),
         r"problems\[0\]\.obs_error: variances must be finite and > 0 \(obs_error\[1\] is -1\)"),
        (lambda: client.assimilate(X, HX, y, np.ones((4, 4)) + np.triu(np.ones((4, 4)), 1)),
         r"problems\[0\]\.obs_error: the covariance must be symmetric"),
        (lambda: client.assimilate(np.where(np.arange(30).reshape(6, 5) == 13, np.nan, X), HX, y, r),
         r"problems\[0\]\.x: values must be finite \(x\[2, 3\] is nan\)"),
        (lambda: client.assimilate(X, HX, np.array([0, np.inf, 0, 0]), r),
         r"problems\[0\]\.y: values must be finite \(y\[1\] is inf\)"),
        (lambda: client.assimilate(X, HX, y, r, inflation=0.0),
         r"problems\[0\]\.inflation: must be finite and > 0"),
        (lambda: client.assimilate(X, HX, y, r, rtps=1.5),
         r"problems\[0\]\.relaxation_factor: must be in \[0, 1\]"),
        (lambda: client.assimilate(X, HX, y, r, method="enkf", perturbations=np.ones((4, 6))),
         r"problems\[0\]\.perturbations\.shape\[1\] is 6 but x\.shape\[1\] \(members\) is 5"),
    ]
    for fn, pattern in cases:
        expect_rpc_error(INVALID, fn, pattern)
        _served(client, rng)
    # A bad problem in a batch names its index; the good ones do not hide it.
    bad = [(X, HX, y, r), (X, HX, y, r), (X, HX, y, np.array([[1.0, 2, 0, 0], [2, 1, 0, 0],
                                                              [0, 0, 1, 0], [0, 0, 0, 1]]))]
    expect_rpc_error(INVALID, lambda: client.assimilate_batch(bad), r"problems\[2\]\.obs_error")
    _served(client, rng)


def test_raw_requests_missing_fields(client, rng):
    """Requests a client library would not build: missing tensors, no perturbation source."""
    X, HX, y, r = _good(rng)
    good = gpucompute.assimilation.problem_proto(X, HX, y, r)
    for clear, pattern in [("x", r"problems\[0\]\.x: is required"),
                           ("obs_error_variance", r"problems\[0\]\.obs_error: one of"),
                           ("y", r"problems\[0\]\.y: is required")]:
        p = compute_pb2.AssimilationProblem()
        p.CopyFrom(good)
        p.ClearField(clear)
        expect_rpc_error(INVALID, lambda: client.stub.Assimilate(
            compute_pb2.AssimilateRequest(problems=[p]), timeout=30), pattern)
    p = compute_pb2.AssimilationProblem()
    p.CopyFrom(good)
    p.method = compute_pb2.ASSIMILATION_METHOD_ENKF
    expect_rpc_error(INVALID, lambda: client.stub.Assimilate(
        compute_pb2.AssimilateRequest(problems=[p]), timeout=30),
        r"problems\[0\]\.perturbation_source: the stochastic EnKF needs perturbations")
    expect_rpc_error(INVALID, lambda: client.stub.Assimilate(
        compute_pb2.AssimilateRequest(problems=[good], dtype=tensor_pb2.FLOAT16), timeout=30),
        r"dtype: must be float64 \(default\) or float32")
    assert len(client.stub.Assimilate(compute_pb2.AssimilateRequest(), timeout=30).results) == 0
    _served(client, rng)


LIMITS = {"assimilate_max_problems": 3, "assimilate_max_members": 8,
          "assimilate_max_covariance_obs": 5}


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    flags = [f"--{k}={v}" for k, v in LIMITS.items()]
    with client_of_server(tmp_path_factory.mktemp("assimilate-limited"), *flags) as c:
        yield c


def test_limits_are_resource_exhausted(limited, rng):
    info = limited.server_info()["assimilateLimits"]
    assert info["maxProblemsPerRequest"] == 3 and info["maxMembers"] == 8
    assert info["maxCovarianceObs"] == 5
    X, HX, y, r = _good(rng)
    expect_rpc_error(EXHAUSTED, lambda: limited.assimilate_batch([(X, HX, y, r)] * 4),
                     r"4 problems; the limit is 3")
    X9, _, HX9, y9, R9 = random_problem(rng, 6, 4, 9, False)
    expect_rpc_error(EXHAUSTED, lambda: limited.assimilate(X9, HX9, y9, np.diag(R9)),
                     r"problems\[0\]\.x\.shape\[1\]: 9 members; the limit is 8")
    X6, _, HX6, y6, R6 = random_problem(rng, 6, 6, 5, True)
    expect_rpc_error(EXHAUSTED, lambda: limited.assimilate(X6, HX6, y6, R6),
                     r"problems\[0\]\.obs_error: a full 6 x 6 covariance is over the limit of 5")
    expect_rpc_error(EXHAUSTED, lambda: limited.assimilate(X6, HX6, y6, np.diag(R6),
                                                           form="observation_space"),
                     r"problems\[0\]\.form: the observation-space form needs an m x m matrix")
    # Just under every limit: served, and the automatic form stays in ensemble space for m > 5.
    res = limited.assimilate_batch([dict(X=X6, HX=HX6, y=y6, obs_error=np.diag(R6))] * 3,
                                   return_diagnostics=True)
    assert all(r.form == "ensemble_space" for r in res)
    assert len(limited.assimilate_batch([(X, HX, y, r)] * 3)) == 3
