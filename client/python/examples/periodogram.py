#!/usr/bin/python3
"""Periodograms of a few synthetic light curves through a gpucompute server.

    PYTHONPATH=build/python /usr/bin/python3 client/python/examples/periodogram.py \
        --target=localhost:50051

Prints, per series, the injected and the recovered period, and the server's timings.
"""

import argparse

import numpy as np

import gpucompute


def light_curve(rng, n, period_days):
    """n observations over ~3 years at random nights (Julian dates), a sinusoid plus noise."""
    t = 2_460_000.0 + np.sort(rng.uniform(0, 1000, n))
    dy = rng.uniform(0.05, 0.2, n)
    y = 12.0 + 0.3 * np.sin(2 * np.pi * t / period_days) + rng.normal(0, dy)
    return t, y, dy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:50051")
    parser.add_argument("--series", type=int, default=8)
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    periods = rng.uniform(0.2, 30.0, args.series)
    series = [light_curve(rng, int(rng.integers(100, 500)), p) for p in periods]

    with gpucompute.Client(args.target, timeout=30.0) as client:
        info = client.server_info()
        print(f"server {info['version']} backend {info['backend']}")
        # Astropy's automatic grid for each series, up to 10 cycles/day, in one request.
        results = client.lombscargle_batch(series, maximum_frequency=10.0, return_peaks=True)
        for period, r in zip(periods, results):
            print(f"period {period:8.4f} d  recovered {1 / r.peak_frequency:8.4f} d  "
                  f"power {r.peak_power:.3f}  ({r.frequency.size} frequencies)")
        print("timings:", client.last_timings)


if __name__ == "__main__":
    main()
