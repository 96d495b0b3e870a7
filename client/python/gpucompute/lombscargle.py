"""Astropy's ``LombScargle``, computed by a gpucompute server.

``from gpucompute import LombScargle`` stands in for ``from astropy.timeseries import
LombScargle``: the same constructor, methods, defaults and errors, with Astropy's rules for
units (``Quantity`` inputs give ``Quantity`` outputs) and times (``Time``/``TimeDelta``). The
server is the one of ``client=`` (a ``gpucompute.Client``) or, by default, of
``$GPUCOMPUTE_TARGET``. Powers, models, model parameters and false-alarm values come from the
server, one Periodogram call each; the automatic grid, the offset, the design matrix and the
single-frequency distribution are computed here, as Astropy does.

Astropy's method names all run on the server: "slow", "chi2" and "cython" (and "scipy") as
its direct sums, exact to rounding; "fast" and "fastchi2" as its NUFFT on the regular grid the
frequencies form (accurate to 1e-9 of the peak, closer than Astropy's own approximation);
"auto" as the direct sums, or the server's choice on a regular grid of more than 200.
``method_kwds``: ``use_fft`` (False: the direct sums) and ``trig_sum_kwds`` (ignored) for the
fast methods; ``n_bootstraps``, ``random_seed`` for bootstrap false-alarm values.
"""

import functools
import os

import numpy as np

from gpucompute.grids import AutoGrid, UniformGrid

# Astropy's names of the methods, in its order (``LombScargle.available_methods``).
METHODS = ("auto", "slow", "chi2", "cython", "fast", "fastchi2", "scipy")
NORMALIZATIONS = ("standard", "psd", "model", "log")
_FAST_KWDS = {"use_fft", "trig_sum_kwds"}


@functools.lru_cache(maxsize=8)
def _client_of(target):
    from gpucompute.client import Client
    return Client(target)


def default_client():
    """The ``Client`` of ``$GPUCOMPUTE_TARGET`` (one per target, kept)."""
    target = os.environ.get("GPUCOMPUTE_TARGET", "").strip()
    if not target:
        raise ValueError("LombScargle needs a server: pass client=gpucompute.Client(target) or "
                         "set GPUCOMPUTE_TARGET=host:port")
    return _client_of(target)


def _has_units(x):
    return hasattr(x, "unit")


def _strip(x):
    """``x`` without its unit (its value in its own unit); None stays None."""
    return None if x is None else getattr(x, "value", x)


def _is_regular(frequency):
    """Astropy's test: 1-D, and every step equal to the first (``np.allclose``)."""
    if frequency.ndim != 1:
        return False
    if len(frequency) == 1:
        return True
    steps = np.diff(frequency)
    return bool(np.allclose(steps[0], steps))


class LombScargle:
    """A series and its periodogram options, as ``astropy.timeseries.LombScargle``.

    Args:
      t, y, dy: times (array, ``Quantity``, ``Time`` or ``TimeDelta``), values and optional
        errors (a scalar or an array), broadcast to one 1-D length.
      fit_mean, center_data, nterms, normalization: as Astropy.
      client: the ``gpucompute.Client`` to compute on (default: ``$GPUCOMPUTE_TARGET``'s).
      dtype: the server's compute type, "float64" (default) or "float32".
    """

    available_methods = list(METHODS)

    def __init__(self, t, y, dy=None, fit_mean=True, center_data=True, nterms=1,
                 normalization="standard", *, client=None, dtype="float64"):
        self.client = default_client() if client is None else client
        self.dtype = dtype
        kind = _time_kind(t)
        self._tstart = t[0] if kind == "time" else None
        trel = self._as_relative_time("t", t)
        self.t = trel if kind == "delta" else t  # Astropy keeps a TimeDelta in days
        self._trel, self.y, self.dy = _validate_inputs(trel, y, dy)
        self.fit_mean = fit_mean
        self.center_data = center_data
        self.nterms = nterms
        self.normalization = normalization

    # ---------------------------------------------------------------- units and times

    def _validate_frequency(self, frequency):
        frequency = np.asanyarray(frequency)
        if _has_units(self._trel):
            return _in_unit(frequency, 1.0 / self._trel.unit,
                            "Units of frequency not equivalent to units of 1/t")
        if _has_units(frequency):
            raise ValueError("frequency have units while 1/t doesn't.")
        return frequency

    def _validate_t(self, t):
        t = np.asanyarray(t)
        if _has_units(self._trel):
            return _in_unit(t, self._trel.unit, "Units of t not equivalent to units of input self.t")
        return t

    def _as_relative_time(self, name, times):
        kind = _time_kind(times)
        if kind == "delta":
            times = times.to("day")
        if self._tstart is None:
            if kind == "time":
                raise TypeError(f"{name} was provided as an absolute time but the LombScargle "
                                "class was initialized with relative times.")
            return times
        if kind != "time":
            raise TypeError(f"{name} was provided as a relative time but the LombScargle class "
                            "was initialized with absolute times.")
        from astropy import units as u
        return (times - self._tstart).to(u.day)

    def _power_unit(self, normalization):
        if not _has_units(self.y):
            return 1
        if self.dy is None and normalization == "psd":
            return self.y.unit ** 2
        from astropy import units
        return units.dimensionless_unscaled

    def _y_unit(self):
        return getattr(self.y, "unit", 1)

    def _errors(self):
        """dy (1 where none was given) as a float64 array of y's length, without its unit."""
        return np.broadcast_to(1.0 if self.dy is None else _strip(self.dy), np.shape(self.y))

    # ---------------------------------------------------------------- the server's part

    def _series(self, model=None, with_dy=True):
        item = {"t": np.asarray(_strip(self._trel), np.float64),
                "y": np.asarray(_strip(self.y), np.float64)}
        if self.dy is not None and with_dy:
            item["dy"] = np.asarray(_strip(self.dy), np.float64)
        if model is not None:
            item["model"] = model
        return item

    def _run(self, frequency, model=None, with_dy=True, fit_mean=None, **kwargs):
        (result,) = self.client.periodogram(
            [self._series(model, with_dy)], frequency,
            fit_mean=self.fit_mean if fit_mean is None else fit_mean,
            center_data=self.center_data, dtype=self.dtype, nterms=self.nterms, **kwargs)
        return result

    # ---------------------------------------------------------------- Astropy's methods

    def autofrequency(self, samples_per_peak=5, nyquist_factor=5, minimum_frequency=None,
                      maximum_frequency=None, return_freq_limits=False):
        """Astropy's automatic grid (computed here, as the server computes it)."""
        baseline = self._trel.max() - self._trel.min()
        df = 1.0 / baseline / samples_per_peak
        if minimum_frequency is None:
            minimum_frequency = 0.5 * df
        if maximum_frequency is None:
            maximum_frequency = nyquist_factor * (0.5 * self._trel.size / baseline)
        n = 1 + int(np.round((maximum_frequency - minimum_frequency) / df))
        if return_freq_limits:
            return minimum_frequency, minimum_frequency + df * (n - 1)
        return minimum_frequency + df * np.arange(n)

    def autopower(self, method="auto", method_kwds=None, normalization=None,
                  samples_per_peak=5, nyquist_factor=5, minimum_frequency=None,
                  maximum_frequency=None):
        """``(frequency, power)`` on the automatic grid."""
        frequency = self.autofrequency(samples_per_peak=samples_per_peak,
                                       nyquist_factor=nyquist_factor,
                                       minimum_frequency=minimum_frequency,
                                       maximum_frequency=maximum_frequency)
        power = self.power(frequency, normalization=normalization, method=method,
                           method_kwds=method_kwds, assume_regular_frequency=True)
        return frequency, power

    def power(self, frequency, normalization=None, method="auto",
              assume_regular_frequency=False, method_kwds=None):
        """The power at ``frequency`` (any shape: the power has that shape)."""
        if normalization is None:
            normalization = self.normalization
        frequency = self._validate_frequency(frequency)
        shape = np.shape(frequency)
        f = np.ravel(np.asarray(_strip(frequency), np.float64))
        method, grid, with_dy, fit_mean = self._method(method, f, assume_regular_frequency,
                                                        method_kwds)
        if self.nterms == 0:  # the offset alone: it explains nothing at any frequency
            if not self.fit_mean:
                raise ValueError("cannot have nterms=0 and no bias")
            return np.zeros(shape) * self._power_unit(normalization)
        power = self._run(grid, with_dy=with_dy, fit_mean=fit_mean,
                          normalization=normalization, method=method).power
        return power.reshape(shape) * self._power_unit(normalization)

    def _method(self, method, f, assume_regular, method_kwds):
        """Astropy's choice and checks of a method, as the server runs it: ``(server method,
        grid to send, whether dy goes, fit_mean to send)``."""
        regular = assume_regular or _is_regular(f)
        if method == "auto":
            if len(f) > 200 and regular:
                method = "fastchi2" if self.nterms != 1 else "fast"
            else:
                method = "chi2" if self.nterms != 1 else "slow"
        if method not in METHODS:
            raise ValueError(f"invalid method: {method}")
        kwds = dict(method_kwds or {})
        allowed = _FAST_KWDS if method.startswith("fast") else set()
        unknown = set(kwds) - allowed
        if unknown:
            raise TypeError(f"method {method!r} got unexpected keyword arguments "
                            f"{sorted(unknown)}")
        if not method.endswith("chi2") and self.nterms != 1:
            raise ValueError("nterms != 1 only supported with 'chi2' or 'fastchi2' methods")
        with_dy, fit_mean = True, None
        if method == "scipy":
            if self.fit_mean:
                raise ValueError("scipy method does not support fit_mean=True")
            if self.dy is not None:
                dy = np.ravel(np.asarray(_strip(self.dy)))
                if not np.allclose(dy[0], dy):
                    raise ValueError("scipy method only supports uniform uncertainties dy")
            with_dy, fit_mean = False, False
        if method.startswith("fast") and kwds.get("use_fft", True):
            if len(f) > 1 and not regular:
                raise ValueError("frequency must be a regular grid")
            df = f[1] - f[0] if len(f) > 1 else 1.0
            return "fast", UniformGrid(float(f[0]), float(df), len(f)), with_dy, fit_mean
        return "direct", f, with_dy, fit_mean

    def model(self, t, frequency):
        """The best-fit model at ``frequency``, evaluated at times ``t``."""
        frequency = self._validate_frequency(frequency)
        t = self._validate_t(self._as_relative_time("t", t))
        t_fit = np.asarray(_strip(t), np.float64)
        y = self._fit(frequency, t_fit.ravel())["y"]
        return y.reshape(t_fit.shape) * self._y_unit()

    def offset(self):
        """The weighted mean of y with center_data, else 0 (computed here)."""
        y = np.asarray(_strip(self.y), np.float64)
        if not self.center_data:
            return 0 * self._y_unit()
        w = self._errors() ** -2.0
        return np.dot(y, w) / w.sum() * self._y_unit()

    def model_parameters(self, frequency, units=True):
        """Astropy's ``model_parameters``: [offset term (fit_mean), sin, cos, ...]."""
        parameters = self._fit(self._validate_frequency(frequency))["parameters"]
        return parameters * self._y_unit() if units else parameters

    def _fit(self, frequency, t=None):
        """The best fit at one ``frequency`` (stripped of its unit): the server's, or for
        nterms = 0 (the offset alone) Astropy's least squares here."""
        f = float(_strip(frequency))
        if self.nterms == 0:
            return self._offset_fit(f, t)
        model = {"frequency": f}
        if t is not None:
            model["t"] = t
        # One frequency is enough: the model is fitted at the one given.
        return self._run([f], model=model, method="direct").model

    def _offset_fit(self, frequency, t):
        """nterms = 0: the weighted least-squares offset of the (centred) data, as Astropy's
        ``model_parameters``, and the model at ``t`` (offset + that constant)."""
        y = np.asarray(_strip(self.y), np.float64)
        offset = float(_strip(self.offset()))
        dy = self._errors()
        x = _design_matrix(_strip(self._trel), frequency, _strip(self.dy), self.fit_mean, 0)
        parameters = np.linalg.solve(x.T @ x, x.T @ ((y - offset) / dy))
        if t is None:
            return {"parameters": parameters, "y": None}
        return {"parameters": parameters,
                "y": offset + _design_matrix(t, frequency, None, self.fit_mean, 0) @ parameters}

    def design_matrix(self, frequency, t=None):
        """Astropy's design matrix X (model = X @ parameters), rows divided by dy."""
        if t is None:
            t, dy = _strip(self._trel), _strip(self.dy)
        else:
            t, dy = _strip(self._validate_t(self._as_relative_time("t", t))), None
        return _design_matrix(t, _strip(frequency), dy, self.fit_mean, self.nterms)

    def distribution(self, power, cumulative=False):
        """The single-frequency distribution (pdf, or cdf if ``cumulative``) of the power."""
        dh = 1 if self.fit_mean or self.center_data else 0
        dk = dh + 2 * self.nterms
        if dk - dh != 2:
            raise NotImplementedError("Degrees of freedom != 2")
        z = np.asarray(_strip(power))
        nk = len(self._trel) - dk
        norm = self.normalization
        if cumulative:
            return 1 - _single(z, nk, norm)
        if norm not in NORMALIZATIONS:
            raise ValueError(f"normalization='{norm}' is not recognized")
        return {"psd": lambda: np.exp(-z),
                "standard": lambda: 0.5 * nk * (1 - z) ** (0.5 * nk - 1),
                "model": lambda: 0.5 * nk * (1 + z) ** (-0.5 * nk - 1),
                "log": lambda: 0.5 * nk * np.exp(-0.5 * nk * z)}[norm]()

    def _false_alarm(self, values, ask, answer, method, method_kwds, samples_per_peak,
                     nyquist_factor, minimum_frequency, maximum_frequency):
        """Sends ``values`` as FalseAlarmSpec field ``ask``; returns result field ``answer`` in
        their shape. ``method_kwds`` (Astropy's ``n_bootstraps``, ``random_seed``) go into the
        spec as ``Client.periodogram`` takes them."""
        if self.nterms != 1:
            raise NotImplementedError("false alarm probability is not implemented for "
                                      "multiterm periodograms.")
        if not (self.fit_mean or self.center_data):
            raise NotImplementedError("false alarm probability is implemented only for "
                                      "periodograms of centered data.")
        x = np.asarray(_strip(values), np.float64)
        if method == "single":  # one frequency's distribution: no server needed
            return _single(x, len(self._trel) - 3, self.normalization, inverse=ask != "powers")
        unknown = set(method_kwds or {}) - {"n_bootstraps", "random_seed"}
        if unknown:
            raise ValueError(f"method_kwds: unknown keys {sorted(unknown)}")
        spec = {"method": method, ask: x.ravel(), **(method_kwds or {})}
        grid = AutoGrid(samples_per_peak, nyquist_factor, _strip(minimum_frequency),
                        _strip(maximum_frequency))
        out = self._run(grid, false_alarm=spec, normalization=self.normalization)
        out = out.false_alarm[answer].reshape(x.shape)
        return out[()] if out.ndim == 0 else out

    def false_alarm_probability(self, power, method="baluev", samples_per_peak=5,
                                nyquist_factor=5, minimum_frequency=None,
                                maximum_frequency=None, method_kwds=None):
        """False-alarm probability of peak heights ``power`` (Astropy's; fmax is the
        automatic grid's largest frequency). Bootstrap: ``method_kwds`` ``n_bootstraps``,
        ``random_seed`` (a seed gives repeatable results, not Astropy's numbers)."""
        return self._false_alarm(power, "powers", "probabilities", method, method_kwds,
                                 samples_per_peak, nyquist_factor, minimum_frequency,
                                 maximum_frequency)

    def false_alarm_level(self, false_alarm_probability, method="baluev", samples_per_peak=5,
                          nyquist_factor=5, minimum_frequency=None, maximum_frequency=None,
                          method_kwds=None):
        """The peak height whose false-alarm probability is ``false_alarm_probability``."""
        return self._false_alarm(false_alarm_probability, "probabilities", "levels", method,
                                 method_kwds, samples_per_peak, nyquist_factor,
                                 minimum_frequency, maximum_frequency)


def _design_matrix(t, frequency, dy, bias, nterms):
    """Astropy's design matrix: a column of ones (``bias``), then sin and cos of 2 pi k f t for
    k = 1 .. nterms, each row divided by dy (None: 1)."""
    t = np.asarray(t)
    frequency = np.asarray(frequency)
    if t.ndim != 1:
        raise ValueError("t should be one dimensional")
    if frequency.ndim != 0:
        raise ValueError("frequency must be a scalar")
    if nterms == 0 and not bias:
        raise ValueError("cannot have nterms=0 and no bias")
    columns = [np.ones_like(t, dtype=np.float64)] if bias else []
    for k in range(1, nterms + 1):
        phase = 2 * np.pi * k * frequency * t
        columns += [np.sin(phase), np.cos(phase)]
    x = np.vstack(columns)
    if dy is not None:
        x = x / dy
    return np.transpose(x)


def _single(x, nk, normalization, inverse=False):
    """Astropy's "single" false-alarm probability of powers ``x`` at one frequency with ``nk``
    degrees of freedom left (n - 3 for a mean and one sinusoid), or with ``inverse`` the level
    of probabilities ``x``."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization='{normalization}' is not recognized")
    if inverse:
        return {"psd": lambda: -np.log(x), "standard": lambda: 1 - x ** (2 / nk),
                "model": lambda: x ** (-2 / nk) - 1,
                "log": lambda: -2 / nk * np.log(x)}[normalization]()
    return {"psd": lambda: np.exp(-x), "standard": lambda: (1 - x) ** (0.5 * nk),
            "model": lambda: (1 + x) ** (-0.5 * nk),
            "log": lambda: np.exp(-0.5 * nk * x)}[normalization]()


def _time_kind(t):
    """"time" for an astropy ``Time``, "delta" for a ``TimeDelta``, else None (without
    importing astropy for plain arrays)."""
    kind = type(t).__name__
    if kind not in ("Time", "TimeDelta") or not type(t).__module__.startswith("astropy."):
        return None
    return "delta" if kind == "TimeDelta" else "time"


def _validate_inputs(t, y, dy):
    """Astropy's checks: t, y (and dy) broadcast to one 1-D shape; with units, all Quantities
    and dy in y's unit."""
    if dy is None:
        t, y = np.broadcast_arrays(t, y, subok=True)
    else:
        t, y, dy = np.broadcast_arrays(t, y, dy, subok=True)
    if t.ndim != 1:
        raise ValueError("Inputs (t, y, dy) must be 1-dimensional")
    if any(_has_units(a) for a in (t, y, dy)):
        from astropy import units
        t, y = units.Quantity(t), units.Quantity(y)
        if dy is not None:
            dy = _in_unit(dy, y.unit, "Units of dy not equivalent to units of y")
    return t, y, dy


def _in_unit(x, unit, message):
    """``x`` as a Quantity in ``unit`` (a plain array is taken as dimensionless), or
    ValueError(message) when the units do not convert."""
    from astropy import units
    try:
        return units.Quantity(units.Quantity(x), unit=unit)
    except units.UnitConversionError:
        raise ValueError(message) from None

