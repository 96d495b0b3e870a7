"""Lorenz-96 twin experiments driven through the server's Assimilate RPC.

The setting of Sakov & Oke (2008, Tellus A 60, "A deterministic formulation of the ensemble
Kalman filter"), as DAPPER's ``dapper/mods/Lorenz96/sakov2008.py`` reproduces it: n = 40,
F = 8, fourth-order Runge-Kutta with dt = 0.05, every variable observed at every step with
R = I, no model error. Each cycle: forecast every member one step, then one Assimilate call
that carries the analyses of all filters being run (several experiments share a request).

Analysis RMSE at a cycle: sqrt(mean_i (mean_j Xa_ij - truth_i)^2); the score is its average
over the scored cycles, after a spin-up that is not scored.
"""

import dataclasses

import numpy as np

N_STATE = 40
FORCING = 8.0
DT = 0.05
GRID = np.arange(N_STATE, dtype=np.float64)  # each variable's (and observation's) coordinate


def tendency(x):
    """dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F along axis 0 (cyclic)."""
    return (np.roll(x, -1, axis=0) - np.roll(x, 2, axis=0)) * np.roll(x, 1, axis=0) - x + FORCING


def rk4_step(x, dt=DT):
    """One classical Runge-Kutta step of Lorenz-96 for a state (n,) or ensemble (n, N)."""
    k1 = tendency(x)
    k2 = tendency(x + 0.5 * dt * k1)
    k3 = tendency(x + 0.5 * dt * k2)
    k4 = tendency(x + dt * k3)
    return x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


@dataclasses.dataclass
class Filter:
    """One filter of an experiment: method, ensemble size, inflation (and for the LETKF its
    localisation radius, Gaspari-Cohn on the periodic grid of variable indices)."""
    method: str          # "enkf" (perturbed observations, server-drawn), "etkf" or "letkf"
    members: int
    inflation: float
    name: str = ""
    radius: float = 0.0  # "letkf": DAPPER's loc_rad, in grid points


@dataclasses.dataclass
class Score:
    filter: Filter
    trial: int
    rmse: float          # time-mean analysis RMSE over the scored cycles
    spread: float        # time-mean analysis spread reported by the server


def run_twin_experiment(client, filters, *, trials=1, spinup=1000, cycles=2000, seed=0,
                        truth_spinup=1000, dtype="float64"):
    """Runs every filter in ``filters`` for ``trials`` independent truths, all in one request
    per cycle. Returns a list of ``Score`` (filters x trials)."""
    rng = np.random.default_rng(seed)
    # Truths on the attractor: from F plus a small perturbation, integrated truth_spinup steps.
    truth = FORCING + 0.01 * rng.standard_normal((N_STATE, trials))
    for _ in range(truth_spinup):
        truth = rk4_step(truth)
    # Initial ensembles: truth plus unit noise, per filter and trial.
    ensembles = []
    for f in filters:
        for t in range(trials):
            ensembles.append(truth[:, [t]] + rng.standard_normal((N_STATE, f.members)))
    keys = [(f, t) for f in filters for t in range(trials)]
    rmse_sum = np.zeros(len(keys))
    spread = np.zeros(len(keys))
    variances = np.ones(N_STATE)
    for k in range(spinup + cycles):
        truth = rk4_step(truth)
        y = truth + rng.standard_normal(truth.shape)  # R = I
        problems = []
        for i, ((f, t), E) in enumerate(zip(keys, ensembles)):
            E = rk4_step(E)
            ensembles[i] = E
            p = dict(X=E, HX=E, y=y[:, t], obs_error=variances, method=f.method,
                     inflation=f.inflation)
            if f.method == "enkf":
                p["seed"] = int(seed) * 1_000_003 + k  # server-drawn, centred, scaled to R
            if f.method == "letkf":
                p.update(state_coords=GRID, obs_coords=GRID,
                         localization=dict(radius=f.radius, metric="periodic", domain=[N_STATE]))
            problems.append(p)
        results = client.assimilate_batch(problems, dtype=dtype, return_diagnostics=True)
        for i, r in enumerate(results):
            ensembles[i] = r.analysis.astype(np.float64)
            if k >= spinup:
                t = keys[i][1]
                err = ensembles[i].mean(axis=1) - truth[:, t]
                rmse_sum[i] += np.sqrt(np.mean(err * err))
                spread[i] += r.analysis_spread
    return [Score(f, t, rmse_sum[i] / cycles, spread[i] / cycles) for i, (f, t) in enumerate(keys)]
