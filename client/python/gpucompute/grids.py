"""Frequency grids of a periodogram request, in cycles per unit of ``t`` (not angular).

A grid is given to the client in one of these forms:

* ``None``: the server chooses one per series, as Astropy's ``LombScargle.autofrequency``
  (``samples_per_peak``, ``nyquist_factor``, ``minimum_frequency``, ``maximum_frequency``).
* ``AutoGrid(...)``: the same, with its parameters spelled in one value.
* ``UniformGrid(f0, df, n)`` or a dict ``{"f0":, "df":, "n":}``: ``f_k = f0 + k * df``,
  ``k = 0 .. n-1``.
* anything else array-like (NumPy array, list, plain tuple): explicit frequencies, sent as
  float64.
"""

import collections

import numpy as np

from gpucompute.tensor import to_tensor
from gpucompute.v1 import compute_pb2

UniformGrid = collections.namedtuple("UniformGrid", ["f0", "df", "n"])
UniformGrid.__doc__ = "Uniform grid f_k = f0 + k * df, k = 0 .. n-1 (cycles per unit of t)."

AutoGrid = collections.namedtuple(
    "AutoGrid",
    ["samples_per_peak", "nyquist_factor", "minimum_frequency", "maximum_frequency"],
    defaults=[5, 5, None, None])
AutoGrid.__doc__ = (
    "Astropy autofrequency grid: df = 1 / (baseline * samples_per_peak), f0 = "
    "minimum_frequency or df / 2, f_max = maximum_frequency or nyquist_factor * n / "
    "(2 * baseline), n = 1 + round((f_max - f0) / df).")


def frequency_grid_proto(frequency):
    """Returns ``(FrequencyGrid message, explicit float64 array or None)`` for a grid form."""
    grid = compute_pb2.FrequencyGrid()
    return grid, set_frequency_grid(grid, frequency)


def set_frequency_grid(grid, frequency):
    """Sets the empty ``FrequencyGrid`` message ``grid`` to a grid form, in place (a request's
    own field: nothing is built apart and copied in); returns the explicit float64 array, or
    None for the other forms.

    The array is returned so that the client can hand back exactly the frequencies it sent.
    """
    if isinstance(frequency, AutoGrid):
        auto = grid.auto
        auto.samples_per_peak = float(frequency.samples_per_peak)
        auto.nyquist_factor = float(frequency.nyquist_factor)
        if frequency.minimum_frequency is not None:
            auto.minimum_frequency = float(frequency.minimum_frequency)
        if frequency.maximum_frequency is not None:
            auto.maximum_frequency = float(frequency.maximum_frequency)
        return None
    if isinstance(frequency, dict):
        frequency = UniformGrid(**frequency)
    if isinstance(frequency, UniformGrid):
        uniform = grid.uniform
        uniform.f0 = float(frequency.f0)
        uniform.df = float(frequency.df)
        uniform.n = int(frequency.n)
        return None
    f = np.asarray(frequency, dtype=np.float64)
    grid.explicit_frequencies.CopyFrom(to_tensor(f))
    return f


# The last few uniform grids' frequencies, read-only, by (f0, df, n): a program that asks for
# one grid again and again gets a copy (one pass over memory) instead of three NumPy passes.
# Only grids of up to _CACHED_GRID_MAX points (512 KiB) are kept.
_GRID_CACHE = collections.OrderedDict()
_GRID_CACHE_SIZE = 8
_CACHED_GRID_MAX = 1 << 16


def uniform_frequencies(grid):
    """Frequencies of a ``UniformGrid`` (or its message): ``f0 + df * arange(n)``, float64, a
    new array.

    This is Astropy's ``minimum_frequency + df * np.arange(Nf)``, so an automatic grid
    rebuilt from the server's ``SeriesResult.grid`` equals ``autofrequency()`` bit for bit; it
    is computed in place in one array (each value rounded as there: ``k * df``, then ``+ f0``).
    """
    key = (float(grid.f0), float(grid.df), int(grid.n))
    cached = _GRID_CACHE.get(key)
    if cached is not None:
        return cached.copy()
    frequencies = np.arange(key[2], dtype=np.float64)
    frequencies *= key[1]
    frequencies += key[0]
    if key[2] <= _CACHED_GRID_MAX:
        kept = frequencies.copy()
        kept.flags.writeable = False
        _GRID_CACHE[key] = kept
        while len(_GRID_CACHE) > _GRID_CACHE_SIZE:
            _GRID_CACHE.popitem(last=False)
    return frequencies
