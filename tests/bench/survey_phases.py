"""Where a survey call's time goes on the client, phase by phase, beside the server's timings.

The e2e survey (``e2e_bench.survey_series``: 2,000 light curves, automatic grids, top 5 peaks,
Baluev false-alarm probabilities, powers discarded) through the Python client, each phase of
the call timed by wrapping the client function that does it: checking the series (pack); as
one request, joining and reserving the packed tensors (join_reserve), uploading them (upload)
and the call (call); cut into parts, starting them, each put together and sent on its own
connection (split_call), then decoding each as it comes (results); as one request, building
the results (results); releasing and deleting the tensors. Prints one JSON line per
``--parts`` value (the requests the packed survey is cut into at most): the call's median,
each phase's mean over the calls, the rest of the mean call (other: cut into parts, mostly
waiting for the answers while nothing is left to decode), and the server's median timings
(decode, queue, compute, total; of the first part when cut).

    python3 tests/bench/survey_phases.py --target HOST:PORT [--calls 9] [--parts 1,4,16]
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_bench  # noqa: E402
import gpucompute  # noqa: E402
from gpucompute import client as client_module, transfer  # noqa: E402

PHASES = [  # (owner, function, label)
    (client_module, "_packed_series", "pack"),
    (transfer.PackedColumns, "fill", "join_reserve"),  # one request: columns joined, reserved
    (transfer.CallTensors, "send", "upload"),
    (client_module.Client, "_call", "call"),
    (client_module.Client, "_split_call", "split_call"),  # parts: put together, sent, answered
    (client_module, "_results_from_columns", "results"),
    (transfer.CallTensors, "release_inputs", "release"),
    (transfer.CallTensors, "close", "delete"),
]


def time_phases(spent):
    """Wraps each phase's function so that its time adds to ``spent[label]`` (ms)."""
    for owner, name, label in PHASES:
        function = getattr(owner, name)

        def timed(*args, _function=function, _label=label, **kwargs):
            start = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                spent[_label] += (time.perf_counter() - start) * 1e3

        setattr(owner, name, timed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="HOST:PORT of a gpucompute server")
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--parts", default=str(transfer.SPLIT_PARTS),
                        help="comma-separated requests the packed survey is cut into at most "
                             "(transfer.SPLIT_PARTS; 1: one request, its tensors uploaded)")
    args = parser.parse_args()
    spent = collections.defaultdict(float)
    time_phases(spent)
    client = gpucompute.Client(args.target)
    series = e2e_bench.survey_series(np.random.default_rng(5), 2000)
    for parts in (int(p) for p in args.parts.split(",")):
        transfer.SPLIT_PARTS = parts
        for _ in range(3):
            e2e_bench.survey_call(client, series, "discard")
        spent.clear()
        round_trips, server = [], []
        for _ in range(args.calls):
            start = time.perf_counter()
            e2e_bench.survey_call(client, series, "discard")
            round_trips.append((time.perf_counter() - start) * 1e3)
            server.append(client.last_timings)
        print(json.dumps({
            "what": f"survey discard, client phases (mean ms over {args.calls} calls)",
            "parts": parts,
            "median_ms": round(statistics.median(round_trips), 1),
            "phases_ms": {label: round(ms / args.calls, 2) for label, ms in spent.items()},
            # The rest of the mean call: cut into parts, mostly waiting for their answers.
            "other_ms": round((sum(round_trips) - sum(spent.values())) / args.calls, 2),
            "server_median_us": {k: statistics.median(t[k] for t in server)
                                 for k in server[0]},
        }), flush=True)


if __name__ == "__main__":
    main()
