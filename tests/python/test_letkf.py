"""The LETKF through a live server (either backend; the CUDA one is also compared with the CPU one).

- Lorenz-96 twin experiments (lorenz96.py: n = 40, F = 8, dt = 0.05, every variable observed
  every step, R = I) with N = 10, where the global ETKF fails: DAPPER's hoteit2015.py reports
  LETKF(N=10, infl=1.02, loc_rad=4) 0.21 and LETKF(N=10, infl=1.04, loc_rad=6) 0.20. Our
  radius is DAPPER's loc_rad (Gaspari-Cohn of half-width 1.82 radius) on the periodic grid of
  variable indices. DAPPER analyses pairs of grid points from the pair's centre and applies a
  random rotation (rot=True); we analyse every point from its own coordinate, without one: the
  scores agree within the run-to-run spread.
- A 2-D periodic field with observations at random points, and points on a sphere with the
  great-circle metric, against a plain NumPy LETKF written here (a loop over state variables:
  distances, taper, the local ETKF by numpy.linalg.eigh), to 1e-10 in float64; every taper.
- With a step taper reaching every observation the LETKF is the global ETKF.
- Well-conditioned local problems (the CUDA kernel's Chebyshev series) and ill-conditioned ones
  (its tridiagonal path), against NumPy to 1e-10.
- Float32 problems: the float64 analysis of their inputs, to float32's rounding.
- Ensembles of 2 to 128 members (the GPU kernel's tiles and lanes), and on a CUDA server the
  same random problems through a CPU server, to 1e-10.
- Variables with more local observations than the CUDA backend lists ahead (128) beside ones
  with few, against NumPy; more variables than it lists at once (65,536), against a CPU server.
- Bad inputs: INVALID_ARGUMENT naming the field; a problem whose neighbour search would examine
  more candidate pairs than --assimilate_max_letkf_candidates: RESOURCE_EXHAUSTED, alone.
"""

import concurrent.futures
import os
import time

import grpc
import numpy as np
import pytest

from conftest import backend, run_server
import gpucompute
from gpucompute.tensor import inline_tensor
from gpucompute.v1 import compute_pb2, tensor_pb2
from letkf_numpy import distances, letkf_reference, taper
from lorenz96 import Filter, run_twin_experiment
from rpc_util import expect_rpc_error

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def random_problem(rng, n_coords, m, N, make_coords):
    state = make_coords(n_coords)
    obs = make_coords(m)
    X = rng.normal(0, 1, (len(state), N)) + 3
    H = rng.normal(0, 1, (m, len(state))) / np.sqrt(len(state))
    HX = H @ X + 0.1 * rng.normal(0, 1, (m, N))
    y = rng.normal(0, 1, m) + HX.mean(axis=1)
    r = rng.uniform(0.3, 2.0, m)
    return state, obs, X, HX, y, r


# ---------------------------------------------------------------------- against NumPy

@pytest.mark.parametrize("kind", ["gaspari_cohn", "gaussian", "step"])
def test_periodic_2d_field_matches_numpy(client, rng, kind):
    lengths = np.array([12.0, 10.0])
    grid = np.stack(np.meshgrid(np.arange(12.0), np.arange(10.0), indexing="ij"), axis=-1).reshape(-1, 2)

    def coords(count):
        return grid if count == len(grid) else rng.uniform(0, 1, (count, 2)) * lengths

    state, obs, X, HX, y, r = random_problem(rng, len(grid), 60, 8, coords)
    radius = 1.7
    got = client.assimilate(X, HX, y, r, method="letkf", inflation=1.05, state_coords=state,
                            obs_coords=obs, localization=dict(radius=radius, taper=kind,
                                                              metric="periodic", domain=lengths))
    want = letkf_reference(X, HX, y, r, state, obs, radius, kind, "periodic", domain=lengths,
                           inflation=1.05)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
    assert np.abs(got - X).max() > 1e-3  # the observations moved it


def test_great_circle_matches_numpy(client, rng):
    def coords(count):
        return np.column_stack([rng.uniform(-180, 180, count), np.degrees(np.arcsin(rng.uniform(-1, 1, count)))])

    state, obs, X, HX, y, r = random_problem(rng, 150, 80, 12, coords)
    result = client.assimilate(X, HX, y, r, method="letkf", state_coords=state, obs_coords=obs,
                               localization=dict(radius=1500.0, metric="great_circle", earth_radius=6371.0),
                               return_diagnostics=True)
    want = letkf_reference(X, HX, y, r, state, obs, 1500.0, "gaspari_cohn", "great_circle",
                           earth_radius=6371.0)
    np.testing.assert_allclose(result.analysis, want, rtol=0, atol=1e-10 * np.abs(want).max())
    np.testing.assert_allclose(result.innovation_mean, y - HX.mean(axis=1), rtol=1e-12, atol=1e-12)
    spread = np.sqrt(np.mean(np.var(want, axis=1, ddof=1)))
    assert result.analysis_spread == pytest.approx(spread, rel=1e-10)


def test_a_step_reaching_every_observation_is_the_global_etkf(client, rng):
    state, obs, X, HX, y, r = random_problem(rng, 30, 25, 6, lambda k: rng.uniform(0, 1, (k, 3)))
    local = client.assimilate(X, HX, y, r, method="letkf", inflation=1.1, rtps=0.5,
                              state_coords=state, obs_coords=obs,
                              localization=dict(radius=10.0, taper="step"))
    glob = client.assimilate(X, HX, y, r, method="etkf", inflation=1.1, rtps=0.5)
    np.testing.assert_allclose(local, glob, rtol=0, atol=1e-10 * np.abs(glob).max())


@pytest.mark.parametrize("members", [2, 9, 32, 33, 50, 56, 57, 64, 70, 128])
def test_ensemble_sizes_match_numpy(client, rng, members):
    state, obs, X, HX, y, r = random_problem(rng, 50, 90, members, lambda k: rng.uniform(0, 30, (k, 1)))
    kw = dict(radius=2.5, metric="periodic", domain=[30.0])
    got = client.assimilate(X, HX, y, r, method="letkf", rtpp=0.3, state_coords=state, obs_coords=obs,
                            localization=kw)
    want = letkf_reference(X, HX, y, r, state, obs, 2.5, "gaspari_cohn", "periodic", domain=np.array([30.0]),
                           rtpp=0.3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())


def local_counts(state, obs, radius, domain):
    """Each variable's local observations (Gaspari-Cohn coefficient above 1e-3)."""
    return np.array([(taper(distances(p, obs, "periodic", domain), radius, "gaspari_cohn") > 1e-3).sum()
                     for p in state])


@pytest.mark.parametrize("members", [20, 50])
def test_dense_and_sparse_neighbourhoods_match_numpy(client, rng, members):
    """Variables with more local observations than the CUDA backend lists ahead (128: those scan
    their candidates themselves) beside variables with few, in one problem: against NumPy."""
    domain = np.array([100.0])
    state = np.arange(0.0, 100.0, 2.0)[:, None]
    obs = np.concatenate([rng.uniform(0, 20, (320, 1)), rng.uniform(20, 100, (100, 1))])
    radius = 2.5
    counts = local_counts(state, obs, radius, domain)
    assert counts.max() > 200 and counts.min() < 30
    _, _, X, HX, y, r = random_problem(rng, len(state), len(obs), members, lambda k: state if k == len(state) else obs)
    kw = dict(radius=radius, metric="periodic", domain=domain)
    got = client.assimilate(X, HX, y, r, method="letkf", rtps=0.3, state_coords=state, obs_coords=obs,
                            localization=kw, return_diagnostics=True)
    want = letkf_reference(X, HX, y, r, state, obs, radius, "gaspari_cohn", "periodic", domain=domain, rtps=0.3)
    np.testing.assert_allclose(got.analysis, want, rtol=0, atol=1e-10 * np.abs(want).max())
    spread = np.sqrt(np.mean(np.var(want, axis=1, ddof=1)))
    assert got.analysis_spread == pytest.approx(spread, rel=1e-10)


def gershgorin_kappas(X, HX, r, state, obs, radius, domain):
    """Per variable, Gershgorin's bound on the local G over N - 1 (G = (N-1) I + Y^T C Y, Gaspari-Cohn,
    periodic): the CUDA kernel's measure of a local problem's conditioning."""
    N = X.shape[1]
    Y = HX - HX.mean(axis=1, keepdims=True)
    kappas = []
    for point in state:
        c = taper(distances(point, obs, "periodic", domain), radius, "gaspari_cohn")
        near = c > 1e-3
        G = (N - 1) * np.eye(N) + Y[near].T @ ((c[near] / r[near])[:, None] * Y[near])
        kappas.append(np.abs(G).sum(axis=1).max() / (N - 1))
    return np.array(kappas)


@pytest.mark.parametrize("error_scale, series", [(30.0, True), (1e-3, False)])
def test_well_and_ill_conditioned_local_problems_match_numpy(client, rng, error_scale, series):
    # Large observation errors keep every local G / (N-1) within kappa 16, where the CUDA kernel
    # takes the Chebyshev series (degree 73 <= 4N); small ones put every G beyond the series'
    # ladder (kappa 45), where it takes the tridiagonal path. Both match NumPy.
    N, domain, radius = 40, np.array([40.0]), 2.0
    state, obs, X, HX, y, r = random_problem(rng, 80, 200, N, lambda k: rng.uniform(0, 40, (k, 1)))
    r = r * error_scale
    kappas = gershgorin_kappas(X, HX, r, state, obs, radius, domain)
    assert kappas.max() <= 16 if series else kappas.min() > 46
    got = client.assimilate(X, HX, y, r, method="letkf", rtps=0.3, state_coords=state, obs_coords=obs,
                            localization=dict(radius=radius, metric="periodic", domain=domain))
    want = letkf_reference(X, HX, y, r, state, obs, radius, "gaspari_cohn", "periodic", domain=domain, rtps=0.3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
    assert np.abs(got - X).max() > 1e-6


@pytest.mark.parametrize("members", [20, 40, 50])
def test_float32_is_the_float64_analysis_of_its_inputs_rounded(client, rng, members):
    # The CUDA kernel computes a float32 problem in float64 from its float32 inputs, with the
    # Chebyshev series truncated for float32 results (2^-30 rather than 1e-15): the result is the
    # float64 analysis of the same inputs to within float32's rounding (the whitened anomalies are
    # held in float32, and the result rounded). The CPU backend computes in float32 throughout.
    state, obs, X, HX, y, r = random_problem(rng, 60, 150, members, lambda k: rng.uniform(0, 40, (k, 1)))
    X, HX, y, r = (a.astype(np.float32).astype(np.float64) for a in (X, HX, y, 30 * r))
    domain = np.array([40.0])
    assert gershgorin_kappas(X, HX, r, state, obs, 2.0, domain).max() <= 16  # the series
    kw = dict(method="letkf", state_coords=state, obs_coords=obs,
              localization=dict(radius=2.0, metric="periodic", domain=domain))
    a64 = client.assimilate(X, HX, y, r, dtype="float64", **kw)
    a32 = client.assimilate(X, HX, y, r, dtype="float32", **kw)
    assert a32.dtype == np.float32
    tol = 1e-6 if backend() == "cuda" else 1e-5
    np.testing.assert_allclose(a32, a64, rtol=0, atol=tol * np.abs(a64).max())
    assert np.abs(a64 - X).max() > 1e-4


@pytest.mark.parametrize("dims", [3, 7])
def test_euclidean_coordinates_of_several_axes_match_numpy(client, rng, dims):
    # Binning takes the first three axes; the distance every axis.
    state, obs, X, HX, y, r = random_problem(rng, 60, 120, 12, lambda k: rng.uniform(0, 4, (k, dims)))
    got = client.assimilate(X, HX, y, r, method="letkf", state_coords=state, obs_coords=obs,
                            localization=dict(radius=0.8, taper="gaussian"))
    want = letkf_reference(X, HX, y, r, state, obs, 0.8, "gaussian", "euclidean")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
    assert np.abs(got - X).max() > 1e-3


def test_cuda_matches_the_cpu_backend(client, rng, tmp_path):
    if backend() != "cuda":
        pytest.skip("compares a CUDA server with a CPU one")
    lengths = np.array([40.0, 30.0])
    state, obs, X, HX, y, r = random_problem(
        rng, 1200, 500, 24, lambda k: rng.uniform(0, 1, (k, 2)) * lengths)
    problems = [dict(X=X, HX=HX, y=y, r=r, method="letkf", inflation=1.03, rtps=0.4, state_coords=state,
                     obs_coords=obs, localization=dict(radius=radius, taper=taper, metric="periodic", domain=lengths))
                for radius, taper in [(1.5, "gaspari_cohn"), (2.0, "gaussian"), (2.5, "step")]]
    with run_server(tmp_path, "--backend=cpu") as target, gpucompute.Client(target, timeout=120) as cpu:
        for dtype, tol in [("float64", 1e-10), ("float32", 1e-4)]:
            for p in problems:
                p = dict(p)
                args = [p.pop(k) for k in ("X", "HX", "y", "r")]
                got = client.assimilate(*args, dtype=dtype, return_diagnostics=True, **p)
                want = cpu.assimilate(*args, dtype=dtype, return_diagnostics=True, **p)
                scale = np.abs(want.analysis).max()
                np.testing.assert_allclose(got.analysis, want.analysis, rtol=0, atol=tol * scale)
                assert got.analysis_spread == pytest.approx(want.analysis_spread, rel=tol)
                np.testing.assert_allclose(got.innovation_mean, want.innovation_mean, rtol=0, atol=tol * scale)


def test_cuda_matches_the_cpu_backend_over_many_chunks(client, rng, tmp_path):
    """More variables than the CUDA backend lists at once (65,536), with a dense cluster of
    observations in the second chunk (variables there scan their candidates themselves)."""
    if backend() != "cuda":
        pytest.skip("compares a CUDA server with a CPU one")
    n = 70000
    domain = np.array([float(n)])
    state = np.arange(float(n))[:, None]
    obs = np.concatenate([rng.uniform(0, n, (5000, 1)), rng.uniform(66000, 66010, (300, 1))])
    _, _, X, HX, y, r = random_problem(rng, n, len(obs), 8, lambda k: state if k == n else obs)
    kw = dict(method="letkf", inflation=1.02, state_coords=state, obs_coords=obs, return_diagnostics=True,
              localization=dict(radius=3.0, metric="periodic", domain=domain))
    with run_server(tmp_path, "--backend=cpu") as target, gpucompute.Client(target, timeout=120) as cpu:
        for dtype, tol in [("float64", 1e-10), ("float32", 1e-4)]:
            got = client.assimilate(X, HX, y, r, dtype=dtype, **kw)
            want = cpu.assimilate(X, HX, y, r, dtype=dtype, **kw)
            np.testing.assert_allclose(got.analysis, want.analysis, rtol=0, atol=tol * np.abs(want.analysis).max())
            assert got.analysis_spread == pytest.approx(want.analysis_spread, rel=tol)
    assert np.abs(got.analysis[66000:66010] - X[66000:66010]).max() > 1e-3  # the cluster moved them


def test_cuda_takes_up_to_128_members(client, rng):
    if backend() != "cuda":
        pytest.skip("the CPU backend takes any ensemble size")
    state, obs, X, HX, y, r = random_problem(rng, 10, 12, 129, lambda k: rng.uniform(0, 5, (k, 1)))
    expect_rpc_error(grpc.StatusCode.UNIMPLEMENTED,
                     lambda: client.assimilate(X, HX, y, r, method="letkf", state_coords=state, obs_coords=obs,
                                               localization=dict(radius=1.0)),
                     r"problems\[0\]\.x: .* at most 128 members, not 129")


def test_float32_is_close_to_float64(client, rng):
    state, obs, X, HX, y, r = random_problem(rng, 40, 30, 10, lambda k: rng.uniform(0, 20, (k, 1)))
    kw = dict(method="letkf", state_coords=state, obs_coords=obs, localization=dict(radius=3.0))
    a64 = client.assimilate(X, HX, y, r, dtype="float64", **kw)
    a32 = client.assimilate(X, HX, y, r, dtype="float32", **kw)
    assert a32.dtype == np.float32
    np.testing.assert_allclose(a32, a64, rtol=0, atol=1e-4 * np.abs(a64).max())


# ---------------------------------------------------------------------- Lorenz-96

PUBLISHED = [  # DAPPER, dapper/mods/Lorenz96/hoteit2015.py, "Expected rmse.a"
    (Filter("letkf", 10, 1.02, "LETKF N=10 loc_rad=4", radius=4.0), 0.21),
    (Filter("letkf", 10, 1.04, "LETKF N=10 loc_rad=6", radius=6.0), 0.20),
]
TOLERANCE = 0.02


def test_lorenz96_letkf_reproduces_dapper(client):
    seed = int(os.environ.get("GPUCOMPUTE_L96_SEED", "2"))
    start = time.monotonic()
    global_etkf = Filter("etkf", 10, 1.02, "global ETKF N=10")
    scores = run_twin_experiment(client, [f for f, _ in PUBLISHED] + [global_etkf], trials=2,
                                 spinup=500, cycles=2000, seed=seed)
    failures = []
    for f, published in PUBLISHED:
        rmse = np.mean([s.rmse for s in scores if s.filter is f])
        print(f"{f.name} inflation {f.inflation}: analysis RMSE {rmse:.4f}, published {published}")
        if not abs(rmse - published) <= TOLERANCE:
            failures.append(f"{f.name}: RMSE {rmse:.4f}, published {published} +- {TOLERANCE}")
    etkf = np.mean([s.rmse for s in scores if s.filter is global_etkf])
    print(f"global ETKF N=10: analysis RMSE {etkf:.4f}; {time.monotonic() - start:.1f} s")
    assert not failures, "; ".join(failures)
    assert not etkf < 3 * PUBLISHED[0][1], "with N = 10 the global ETKF should fail where the LETKF does not"


# ---------------------------------------------------------------------- bad inputs

def letkf_request(n=6, m=5, N=4, d=2, **localization):
    rng = np.random.default_rng(0)
    fields = dict(radius=2.0)
    fields.update(localization)

    def tensor(a):
        return inline_tensor(tensor_pb2.FLOAT64, np.ascontiguousarray(a, dtype="<f8"))

    p = compute_pb2.AssimilationProblem(
        x=tensor(rng.normal(size=(n, N))), hx=tensor(rng.normal(size=(m, N))), y=tensor(rng.normal(size=m)),
        obs_error_variance=tensor(np.ones(m)), method=compute_pb2.ASSIMILATION_METHOD_LETKF)
    p.localization.state_coords.CopyFrom(tensor(fields.pop("state_coords", rng.uniform(0, 5, (n, d)))))
    p.localization.obs_coords.CopyFrom(tensor(fields.pop("obs_coords", rng.uniform(0, 5, (m, d)))))
    for k, v in fields.items():
        if k == "domain":
            p.localization.domain.extend(v)
        else:
            setattr(p.localization, k, v)
    return compute_pb2.AssimilateRequest(problems=[p])


@pytest.mark.parametrize("request_kw, pattern", [
    (dict(state_coords=np.zeros((5, 2))), r"problems\[0\]\.localization\.state_coords\.shape\[0\] is 5"),
    (dict(obs_coords=np.zeros((5, 3))), r"problems\[0\]\.localization\.obs_coords\.shape\[1\] is 3"),
    (dict(obs_coords=np.array([[0, 1], [np.nan, 2], [1, 1], [2, 2], [3, 3]])),
     r"problems\[0\]\.localization\.obs_coords: values must be finite"),
    (dict(radius=0.0), r"problems\[0\]\.localization\.radius: must be finite and > 0"),
    (dict(radius=-1.0), r"problems\[0\]\.localization\.radius"),
    (dict(metric=7), r"problems\[0\]\.localization\.metric: unknown value 7"),
    (dict(taper=9), r"problems\[0\]\.localization\.taper: unknown value 9"),
    (dict(metric=compute_pb2.LOCALIZATION_METRIC_PERIODIC, domain=[5.0]),
     r"problems\[0\]\.localization\.domain: .* 2 axes"),
    (dict(metric=compute_pb2.LOCALIZATION_METRIC_PERIODIC, domain=[5.0, 0.0]),
     r"problems\[0\]\.localization\.domain\[1\]"),
    (dict(metric=compute_pb2.LOCALIZATION_METRIC_GREAT_CIRCLE),
     r"problems\[0\]\.localization\.earth_radius"),
])
def test_bad_localization_is_invalid_argument(client, request_kw, pattern):
    request = letkf_request(**request_kw)
    expect_rpc_error(INVALID, lambda: client.stub.Assimilate(request, timeout=30), pattern)
    client.assimilate(np.ones((2, 3)) + np.eye(2, 3), np.ones((1, 3)) + [[0, 1, 2]], [1.0], [1.0])  # serves on


def test_letkf_needs_its_localization_and_a_diagonal_r(client):
    request = letkf_request()
    request.problems[0].ClearField("localization")
    expect_rpc_error(INVALID, lambda: client.stub.Assimilate(request, timeout=30),
                     r"problems\[0\]\.localization: is required for the LETKF")
    request = letkf_request()
    p = request.problems[0]
    p.obs_error_covariance.CopyFrom(p.obs_error_variance)
    p.obs_error_covariance.shape[:] = [5, 5]
    p.obs_error_covariance.data = np.eye(5).astype("<f8").tobytes()
    expect_rpc_error(INVALID, lambda: client.stub.Assimilate(request, timeout=30),
                     r"problems\[0\]\.obs_error: the LETKF takes observation error variances")
    request = compute_pb2.AssimilateRequest()
    request.CopyFrom(letkf_request())
    request.problems[0].method = compute_pb2.ASSIMILATION_METHOD_ETKF
    expect_rpc_error(INVALID, lambda: client.stub.Assimilate(request, timeout=30),
                     r"problems\[0\]\.localization: only the LETKF")


def test_a_problem_over_the_candidate_limit_is_resource_exhausted_alone(rng, tmp_path):
    """200 variables and 100 observations over [0, 100)^2: radius 1 leaves a few candidates a
    variable (cells at least 3.6 wide); radius 1000 puts every observation in one cell, 20,000
    pairs. Under a limit of 5,000 the second is refused before its analysis, with the count and
    the flag, while a request sent beside it and the next call are served."""
    state, obs, X, HX, y, r = random_problem(rng, 200, 100, 8, lambda k: rng.uniform(0, 100, (k, 2)))

    def call(c, radius):
        return c.assimilate(X, HX, y, r, method="letkf", state_coords=state, obs_coords=obs,
                            localization=dict(radius=radius))

    with run_server(tmp_path, "--assimilate_max_letkf_candidates=5000") as target, \
            gpucompute.Client(target, timeout=60) as c:
        assert c.stub.ServerInfo(compute_pb2.ServerInfoRequest()).assimilate_limits.max_letkf_candidates == 5000
        want = call(c, 1.0)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for _ in range(3):
                big, small = pool.submit(call, c, 1000.0), pool.submit(call, c, 1.0)
                expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, big.result,
                                 r"problems\[0\]\.localization\.radius: the neighbour search would examine "
                                 r"20000 \(state variable, observation\) pairs, over the limit of 5000 "
                                 r"\(--assimilate_max_letkf_candidates\)")
                np.testing.assert_array_equal(small.result(), want)
        np.testing.assert_array_equal(call(c, 1.0), want)
