#!/usr/bin/python3
"""Draws gpucompute-load's JSON Lines: latency (p50, p99) and throughput against concurrency
(closed loop) or offered rate (open loop), with the Echo comparison when the run has one.

Usage: plot_load.py RESULTS.jsonl OUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    levels = load(argv[1])
    if not levels:
        print(f"{argv[1]}: no levels", file=sys.stderr)
        return 1
    closed = levels[0]["loop"] == "closed"
    key = "concurrency" if closed else "rate"
    levels = sorted(levels, key=lambda l: l[key])
    x = [l[key] for l in levels]
    run = levels[0]["run"]
    workload = levels[0]["workload"]
    has_echo = all("echo" in l for l in levels)
    large = levels[0].get("payload_bytes_per_request", 0) >= (1 << 20)

    fig, (ax_lat, ax_tp) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, figures, style in [(workload, lambda l: l, "-")] + (
            [("echo", lambda l: l["echo"], "--")] if has_echo else []):
        p50 = [figures(l)["latency_us"]["p50"] / 1e3 for l in levels]
        p99 = [figures(l)["latency_us"]["p99"] / 1e3 for l in levels]
        ax_lat.plot(x, p50, style, marker="o", label=f"{name} p50")
        ax_lat.plot(x, p99, style, marker="^", label=f"{name} p99")
        if large:
            tp = [figures(l)["payload_gb_per_s"] for l in levels]
        else:
            tp = [figures(l)["requests_per_s"] for l in levels]
        ax_tp.plot(x, tp, style, marker="o", label=name)

    for ax in (ax_lat, ax_tp):
        if len(x) > 1 and max(x) / max(min(x), 1e-9) >= 8:
            ax.set_xscale("log", base=2 if closed else 10)
        ax.set_xticks(x)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("concurrency (requests in flight)" if closed else "offered rate (requests/s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax_lat.set_yscale("log")
    ax_lat.set_ylabel("latency (ms)")
    ax_tp.set_ylabel("payload GB/s" if large else "requests/s")
    lines = [y for line in ax_tp.get_lines() for y in line.get_ydata() if y > 0]
    if lines and max(lines) / min(lines) > 20:
        ax_tp.set_yscale("log")  # e.g. a slow CPU service next to its echo
    else:
        ax_tp.set_ylim(bottom=0)

    server = run.get("server", {})
    title = (f"gpucompute-load: {workload}, {run.get('mode')} {run.get('input')} inputs, "
             f"{server.get('backend', '?')} {server.get('device', '')}").strip()
    if has_echo:
        ratios = ", ".join(f"{l['service_echo_ratio']:.3g}" for l in levels)
        title += f"\nservice/echo requests/s: {ratios}"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
