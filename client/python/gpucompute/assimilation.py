"""Ensemble data assimilation: encoding ``AssimilateRequest`` problems, decoding results.

One problem is the analysis step of an ensemble Kalman filter (docs/python.md "Assimilate" and
``server/ops/assimilate/assimilate.h`` state the conventions):

* ``X`` ``(n, N)`` forecast ensemble (state x members), ``HX`` ``(m, N)`` the ensemble in
  observation space (apply your own, possibly nonlinear, H), ``y`` ``(m,)`` observations;
* ``obs_error``: ``(m,)`` observation-error **variances** (diagonal R), an ``(m, m)`` covariance,
  or a scalar variance used for every observation;
* ``method``: ``"etkf"`` (symmetric square root) or ``"enkf"`` (perturbed observations, with
  ``perturbations`` ``(m, N)`` used as given, or drawn on the server from ``seed``: centred
  across members and scaled to R; neither given: a random seed is drawn here);
* ``inflation`` of the forecast anomalies (default 1), ``rtpp`` or ``rtps``: a relaxation
  factor in [0, 1]; ``form``: ``"auto"``, ``"observation_space"`` or ``"ensemble_space"``.
"""

import dataclasses
import secrets

import numpy as np

from gpucompute.tensor import compute_dtype  # noqa: F401 (assimilation.compute_dtype, as before)
from gpucompute.tensor import from_tensor, inline_tensor, is_reference, reference_tensor
from gpucompute.v1 import compute_pb2, tensor_pb2

METHODS = {
    "etkf": compute_pb2.ASSIMILATION_METHOD_ETKF,
    "enkf": compute_pb2.ASSIMILATION_METHOD_ENKF,
    "letkf": compute_pb2.ASSIMILATION_METHOD_LETKF,
}
METRICS = {
    "euclidean": compute_pb2.LOCALIZATION_METRIC_EUCLIDEAN,
    "periodic": compute_pb2.LOCALIZATION_METRIC_PERIODIC,
    "great_circle": compute_pb2.LOCALIZATION_METRIC_GREAT_CIRCLE,
}
TAPERS = {
    "gaspari_cohn": compute_pb2.LOCALIZATION_TAPER_GASPARI_COHN,
    "gaussian": compute_pb2.LOCALIZATION_TAPER_GAUSSIAN,
    "step": compute_pb2.LOCALIZATION_TAPER_STEP,
}
LOCALIZATION_KEYS = {"radius", "taper", "metric", "domain", "earth_radius"}
FORMS = {
    "auto": compute_pb2.ANALYSIS_FORM_AUTO,
    "observation_space": compute_pb2.ANALYSIS_FORM_OBSERVATION_SPACE,
    "ensemble_space": compute_pb2.ANALYSIS_FORM_ENSEMBLE_SPACE,
}
_FORM_NAMES = {code: name for name, code in FORMS.items()}
_WIRE_FLOATS = {
    np.dtype("float16"): tensor_pb2.FLOAT16,
    np.dtype("float32"): tensor_pb2.FLOAT32,
    np.dtype("float64"): tensor_pb2.FLOAT64,
}
PROBLEM_KEYS = {"X", "HX", "y", "obs_error", "method", "inflation", "perturbations", "seed",
                "rtpp", "rtps", "form", "state_coords", "obs_coords", "localization"}


@dataclasses.dataclass
class AssimilationResult:
    """One problem's analysis.

    Attributes:
      analysis: ``(n, N)`` analysis ensemble in the request's dtype (a ``TensorHandle`` with
        ``output="keep"``, a view of the region with a shared-memory output).
      innovation_mean: ``(m,)`` float64, ``y - HX.mean(axis=1)`` (placed like ``analysis``).
      analysis_spread: ``sqrt(trace(Pa) / n)``, Pa the analysis sample covariance (N - 1).
      form: ``"observation_space"`` or ``"ensemble_space"``: the form the server used.
    """
    analysis: np.ndarray
    innovation_mean: np.ndarray
    analysis_spread: float
    form: str


def _tensor(name, a, ndim, encode):
    reference = is_reference(a)  # resident on the server or in shared memory
    if not reference:
        a = np.asarray(a)
    if len(a.shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimension{'s' if ndim > 1 else ''}, "
                         f"got shape {a.shape}")
    if reference:  # only the name travels
        return reference_tensor(a)
    code = _WIRE_FLOATS.get(a.dtype)
    if code is None:
        a, code = a.astype(np.float64), tensor_pb2.FLOAT64
    return encode(code, np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")))


def _localization(state_coords, obs_coords, localization, encode):
    """The LETKF's ``Localization`` message: coordinates ``(n, d)`` and ``(m, d)`` (a 1-D array
    is one coordinate per point) and ``localization``, a dict with ``radius`` (required),
    ``taper`` (``"gaspari_cohn"``, ``"gaussian"``, ``"step"``), ``metric`` (``"euclidean"``,
    ``"periodic"`` with ``domain``, the length of each axis, ``"great_circle"`` with
    ``earth_radius``, coordinates (longitude, latitude) in degrees)."""
    if state_coords is None or obs_coords is None or localization is None:
        raise ValueError("method='letkf' needs state_coords, obs_coords and localization=dict(radius=...)")
    unknown = set(localization) - LOCALIZATION_KEYS
    if unknown:
        raise ValueError(f"unknown localization keys {sorted(unknown)}; expected {sorted(LOCALIZATION_KEYS)}")
    if "radius" not in localization:
        raise ValueError("localization needs a radius")
    metric = str(localization.get("metric", "euclidean")).lower()
    taper = str(localization.get("taper", "gaspari_cohn")).lower()
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {sorted(METRICS)}")
    if taper not in TAPERS:
        raise ValueError(f"taper {taper!r}: expected one of {sorted(TAPERS)}")

    def coords(name, c):
        if is_reference(c):
            return _tensor(name, c, 2, encode)
        c = np.asarray(c, dtype=np.float64)
        return _tensor(name, c[:, None] if c.ndim == 1 else c, 2, encode)

    msg = compute_pb2.Localization(
        state_coords=coords("state_coords", state_coords), obs_coords=coords("obs_coords", obs_coords),
        metric=METRICS[metric], taper=TAPERS[taper], radius=float(localization["radius"]),
        earth_radius=float(localization.get("earth_radius", 0.0)))
    domain = localization.get("domain")
    if domain is not None:
        msg.domain.extend(float(v) for v in np.atleast_1d(domain))
    return msg


def problem_proto(X, HX, y, obs_error, method="etkf", inflation=1.0, perturbations=None,
                  seed=None, rtpp=None, rtps=None, form="auto", state_coords=None,
                  obs_coords=None, localization=None, *, encode=inline_tensor):
    """Builds one ``AssimilationProblem`` message (see the module docstring for arguments;
    ``encode`` makes each array's Tensor, see ``gpucompute.tensor.inline_tensor``).

    Only what is needed to encode is checked here (dimensions, names, one relaxation); the
    server checks shapes against each other and values, naming the field.
    """
    method_name = str(method).lower()
    if method_name not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {sorted(METHODS)}")
    form_name = str(form).lower()
    if form_name not in FORMS:
        raise ValueError(f"form {form!r}: expected one of {sorted(FORMS)}")
    msg = compute_pb2.AssimilationProblem(
        x=_tensor("X", X, 2, encode), hx=_tensor("HX", HX, 2, encode),
        y=_tensor("y", y, 1, encode),
        method=METHODS[method_name], inflation=float(inflation), form=FORMS[form_name])
    r = obs_error if is_reference(obs_error) else np.asarray(obs_error)
    if r.ndim == 0:
        r = np.full(msg.hx.shape[0], float(r))
    if r.ndim == 1:
        msg.obs_error_variance.CopyFrom(_tensor("obs_error", r, 1, encode))
    elif r.ndim == 2:
        msg.obs_error_covariance.CopyFrom(_tensor("obs_error", r, 2, encode))
    else:
        raise ValueError(f"obs_error must be a scalar, (m,) variances or an (m, m) covariance, "
                         f"got shape {r.shape}")
    if perturbations is not None and seed is not None:
        raise ValueError("give perturbations or seed, not both")
    if method_name == "enkf":
        if perturbations is not None:
            msg.perturbations.CopyFrom(_tensor("perturbations", perturbations, 2, encode))
        else:
            msg.seed = int(secrets.randbits(64) if seed is None else seed) & ((1 << 64) - 1)
    elif perturbations is not None:
        raise ValueError("perturbations are only used by method='enkf'")
    if method_name == "letkf":
        msg.localization.CopyFrom(_localization(state_coords, obs_coords, localization, encode))
    elif state_coords is not None or obs_coords is not None or localization is not None:
        raise ValueError("state_coords, obs_coords and localization are only used by method='letkf'")
    if rtpp is not None and rtps is not None:
        raise ValueError("give rtpp or rtps, not both")
    if rtpp is not None:
        msg.relaxation, msg.relaxation_factor = compute_pb2.RELAXATION_RTPP, float(rtpp)
    elif rtps is not None:
        msg.relaxation, msg.relaxation_factor = compute_pb2.RELAXATION_RTPS, float(rtps)
    return msg


def problem_from_item(item, encode=inline_tensor):
    """A batch item (a dict with the keyword names, ``X``, ``HX``, ``y``, ``obs_error``
    required; or a tuple ``(X, HX, y, obs_error)``) -> ``AssimilationProblem``."""
    if isinstance(item, dict):
        unknown = set(item) - PROBLEM_KEYS
        if unknown:
            raise ValueError(f"unknown problem keys {sorted(unknown)}; expected {sorted(PROBLEM_KEYS)}")
        return problem_proto(**item, encode=encode)
    if len(item) != 4:
        raise ValueError("each problem must be a dict or (X, HX, y, obs_error)")
    return problem_proto(*item, encode=encode)


def result_from_proto(result, decode=from_tensor):
    """``AssimilationResult`` message -> ``AssimilationResult``; ``decode`` turns each output
    Tensor into what the caller gets (an array, or a handle / shared-memory view)."""
    return AssimilationResult(analysis=decode(result.analysis),
                              innovation_mean=decode(result.innovation_mean),
                              analysis_spread=float(result.analysis_spread),
                              form=_FORM_NAMES.get(result.form, str(result.form)))
