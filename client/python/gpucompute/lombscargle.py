"""Astropy's ``LombScargle`` interface, computed by a gpucompute server.

``gpucompute.LombScargle(client, t, y, dy, ...)`` takes the arguments of
``astropy.timeseries.LombScargle`` (plain arrays; no units) and offers the same methods:
``autofrequency``, ``autopower``, ``power``, ``false_alarm_probability``,
``false_alarm_level``, ``model``, ``model_parameters`` and ``offset``. Each call that needs the
data is one Periodogram RPC.
"""

import numpy as np

from gpucompute.grids import AutoGrid


class LombScargle:
    """A series and its periodogram options, as ``astropy.timeseries.LombScargle``.

    Args:
      client: a ``gpucompute.Client``.
      t, y, dy: observation times, values and (optional) errors: 1-D arrays of one length.
      fit_mean, center_data, nterms, normalization: as Astropy.
      dtype: the server's compute type, "float64" (default) or "float32".
    """

    def __init__(self, client, t, y, dy=None, fit_mean=True, center_data=True, nterms=1,
                 normalization="standard", dtype="float64"):
        self.client = client
        self.t = np.asarray(t, np.float64)
        self.y = np.asarray(y, np.float64)
        self.dy = None if dy is None else np.broadcast_to(np.asarray(dy, np.float64),
                                                          self.t.shape).copy()
        self.fit_mean = fit_mean
        self.center_data = center_data
        self.nterms = nterms
        self.normalization = normalization
        self.dtype = dtype

    def _series(self, model=None):
        item = {"t": self.t, "y": self.y}
        if self.dy is not None:
            item["dy"] = self.dy
        if model is not None:
            item["model"] = model
        return item

    def _run(self, frequency, model=None, **kwargs):
        (result,) = self.client.periodogram(
            [self._series(model)], frequency, fit_mean=self.fit_mean,
            center_data=self.center_data, normalization=self.normalization, dtype=self.dtype,
            nterms=self.nterms, **kwargs)
        return result

    def autofrequency(self, samples_per_peak=5, nyquist_factor=5, minimum_frequency=None,
                      maximum_frequency=None, return_freq_limits=False):
        """Astropy's automatic grid (computed here, as the server computes it)."""
        baseline = self.t.max() - self.t.min()
        df = 1.0 / baseline / samples_per_peak
        f0 = 0.5 * df if minimum_frequency is None else minimum_frequency
        fmax = (nyquist_factor * 0.5 * self.t.size / baseline
                if maximum_frequency is None else maximum_frequency)
        n = 1 + int(np.round((fmax - f0) / df))
        if return_freq_limits:
            return f0, f0 + df * (n - 1)
        return f0 + df * np.arange(n)

    def autopower(self, method="auto", samples_per_peak=5, nyquist_factor=5,
                  minimum_frequency=None, maximum_frequency=None):
        """``(frequency, power)`` on the automatic grid."""
        result = self._run(AutoGrid(samples_per_peak, nyquist_factor, minimum_frequency,
                                    maximum_frequency), method=method)
        return result.frequency, result.power

    def power(self, frequency, method="auto"):
        """The power at ``frequency`` (explicit frequencies: the direct method is used unless
        they come as a ``UniformGrid``)."""
        frequency_arg = frequency
        scalar = np.ndim(frequency) == 0
        if scalar:
            frequency_arg = [float(frequency)]
        if method == "auto" and not hasattr(frequency_arg, "df"):
            method = "direct"
        power = self._run(frequency_arg, method=method).power
        return power[0] if scalar else power

    def _false_alarm(self, values, ask, answer, method, method_kwds, samples_per_peak,
                     nyquist_factor, minimum_frequency, maximum_frequency):
        """Sends ``values`` as FalseAlarmSpec field ``ask``; returns result field ``answer`` in
        their shape. ``method_kwds`` (Astropy's ``n_bootstraps``, ``random_seed``) go into the
        spec as ``Client.periodogram`` takes them."""
        unknown = set(method_kwds or {}) - {"n_bootstraps", "random_seed"}
        if unknown:
            raise ValueError(f"method_kwds: unknown keys {sorted(unknown)}")
        x = np.asarray(values, np.float64)
        spec = {"method": method, ask: x.ravel(), **(method_kwds or {})}
        grid = AutoGrid(samples_per_peak, nyquist_factor, minimum_frequency, maximum_frequency)
        out = self._run(grid, false_alarm=spec).false_alarm[answer].reshape(x.shape)
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

    def _model(self, frequency, t=None):
        model = {"frequency": float(frequency)}
        if t is not None:
            model["t"] = np.asarray(t, np.float64)
        # One frequency is enough: the model is fitted at the one given.
        return self._run([float(frequency)], model=model, method="direct").model

    def model_parameters(self, frequency):
        """Astropy's ``model_parameters``: [offset term (fit_mean), sin, cos, ...]."""
        return self._model(frequency)["parameters"]

    def model(self, t, frequency):
        """The best-fit model at ``frequency``, evaluated at times ``t``."""
        t = np.asarray(t, np.float64)
        y = self._model(frequency, t.ravel())["y"]
        return y.reshape(t.shape)

    def offset(self):
        """The weighted mean of y with center_data, else 0 (computed here)."""
        if not self.center_data:
            return 0.0
        w = np.ones_like(self.y) if self.dy is None else self.dy ** -2.0
        return float(np.dot(self.y, w) / w.sum())
