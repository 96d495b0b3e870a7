"""gpucompute-load against a live server: short runs of each mode, checked through --json/--csv.

Run by CTest as `python_load` with $GPUCOMPUTE_LOAD (the binary) and $GPUCOMPUTE_SERVER set;
the server is conftest's session server (CPU backend unless $GPUCOMPUTE_BACKEND says otherwise).
"""

import csv
import json
import os
import pathlib
import subprocess

import pytest

import gpucompute

from conftest import run_server

_REPO = pathlib.Path(__file__).resolve().parents[2]
SHORT = ["--duration", "1s", "--warmup", "0.3s", "--progress", "off"]
PERCENTILES = ["min", "p50", "p90", "p95", "p99", "p999", "max"]


def load_binary():
    path = os.environ.get("GPUCOMPUTE_LOAD") or str(_REPO / "build/client/load/gpucompute-load")
    if not os.access(path, os.X_OK):
        pytest.fail(f"gpucompute-load not found at {path!r}; set GPUCOMPUTE_LOAD", pytrace=False)
    return path


def run_load(target, *args, check=True, timeout=300):
    argv = [load_binary(), "--target", target, *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, (f"{' '.join(argv)} exited {proc.returncode}\n"
                                      f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def read_levels(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check_figures(f, *, expect_server_timings=True):
    """A level's (or an op's, or the echo's) figures: work done, no errors, ordered latencies."""
    assert f["ok"] > 0, f
    assert f["errors"] == 0 and f["errors_by_code"] == {}, f["errors_by_code"]
    assert f["requests_per_s"] > 0 and f["seconds"] > 0
    lat = f["latency_us"]
    assert lat["count"] == f["ok"]
    values = [lat[k] for k in PERCENTILES]
    assert values == sorted(values), lat
    assert lat["min"] > 0
    assert lat["min"] <= lat["mean"] <= lat["max"]
    if expect_server_timings:
        server = f["server_us"]
        assert server["total"]["count"] > 0, server
        assert server["compute"]["p50"] <= server["total"]["p50"] + 1
        assert f["batch_requests"]["count"] > 0 and f["batch_requests"]["min"] >= 1


def test_echo_closed_loop_json_csv_plot(server_target, tmp_path):
    jsonl, table, png = tmp_path / "echo.jsonl", tmp_path / "echo.csv", tmp_path / "echo.png"
    plot = ["--plot", str(png), "--python", "/usr/bin/python3"]
    # The plot runs in /usr/bin/python3 (Debian's, with python3-matplotlib), which need not be
    # the interpreter running this test.
    have_matplotlib = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"],
                                     capture_output=True).returncode == 0
    if not have_matplotlib:
        plot = []
    proc = run_load(server_target, "--op", "echo", "--bytes", "4Ki", "--concurrency", "1,4",
                    *SHORT, "--json", str(jsonl), "--csv", str(table), *plot)
    assert "req/s" in proc.stdout and "c=4" in proc.stdout, proc.stdout

    levels = read_levels(jsonl)
    assert [l["concurrency"] for l in levels] == [1, 4]
    for level in levels:
        assert level["workload"] == "echo" and level["loop"] == "closed"
        assert level["payload_bytes_per_request"] == 4096
        check_figures(level, expect_server_timings=False)
        # Each OK echo moved its 4 KiB payload.
        assert level["payload_bytes_per_s"] == pytest.approx(4096 * level["requests_per_s"])
        assert level["run"]["mode"] == "unary" and level["run"]["input"] == "inline"
        assert level["run"]["server"]["backend"]

    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["concurrency"]) for r in rows] == [1, 4]
    for row, level in zip(rows, levels):
        assert row["op"] == "all" and int(row["ok"]) == level["ok"]
        assert float(row["requests_per_s"]) == pytest.approx(level["requests_per_s"])
        assert float(row["latency_p99_us"]) == pytest.approx(level["latency_us"]["p99"])

    if have_matplotlib:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_echo_split_over_channels(server_target, tmp_path, mode):
    """--split 4: each 1 MiB request is four 256 KiB Echo calls on four channels at once."""
    jsonl = tmp_path / f"split-{mode}.jsonl"
    run_load(server_target, "--op", "echo", "--bytes", "1Mi", "--split", "4", "--channels", "4",
             "--mode", mode, "--concurrency", "1,2", *SHORT, "-q", "--json", str(jsonl))
    levels = read_levels(jsonl)
    assert [l["concurrency"] for l in levels] == [1, 2]
    for level in levels:
        assert level["run"]["echo"]["split"] == 4 and level["run"]["channels"] == 4
        assert level["payload_bytes_per_request"] == 1 << 20
        check_figures(level, expect_server_timings=False)
        assert level["payload_bytes_per_s"] == pytest.approx((1 << 20) * level["requests_per_s"])
        # Four replies of 256 KiB (plus framing) per request.
        per_request = level["response_bytes_per_s"] / level["requests_per_s"]
        assert (1 << 20) <= per_request < (1 << 20) + 4096


@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_periodogram_with_compare_echo(server_target, tmp_path, mode):
    jsonl = tmp_path / f"periodogram-{mode}.jsonl"
    proc = run_load(server_target, "--op", "periodogram", "--samples", "200", "--frequencies",
                    "300", "--dtype", "float32", "--mode", mode, "--concurrency", "1,8",
                    "--compare-echo", *SHORT, "--json", str(jsonl))
    assert "service/echo" in proc.stdout, proc.stdout
    levels = read_levels(jsonl)
    assert [l["concurrency"] for l in levels] == [1, 8]
    for level in levels:
        assert level["workload"] == "periodogram" and level["run"]["mode"] == mode
        # t, y, dy of 200 float32 samples.
        assert level["payload_bytes_per_request"] == 3 * 200 * 4
        check_figures(level)
        check_figures(level["echo"], expect_server_timings=False)
        assert level["service_echo_ratio"] == pytest.approx(
            level["requests_per_s"] / level["echo"]["requests_per_s"])
        assert level["response_bytes_per_s"] > 0


def test_open_loop_poisson_counts_requests(server_target, tmp_path):
    jsonl, table = tmp_path / "open.jsonl", tmp_path / "open.csv"
    run_load(server_target, "--op", "periodogram", "--samples", "100", "--frequencies", "100",
             "--rate", "150,300", "--arrival", "poisson", "--requests", "120", "--warmup", "0.2s",
             "--progress", "off", "-q", "--json", str(jsonl), "--csv", str(table))
    levels = read_levels(jsonl)
    assert [l["rate"] for l in levels] == [150, 300]
    for level in levels:
        assert level["loop"] == "open" and level["concurrency"] is None
        assert level["requests"] + level["dropped"] == 120
        check_figures(level)
        # Arrivals at 150/s and 300/s: the achieved rate follows the offered one.
        assert level["requests_per_s"] == pytest.approx(level["rate"], rel=0.35)
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert [r["loop"] for r in rows] == ["open", "open"]


def test_mix_loads_and_unloads_the_dense_model(server_target, client, tmp_path):
    jsonl = tmp_path / "mix.jsonl"
    models_before = {m["name"] for m in client.list_models()}
    run_load(server_target, "--op", "mix", "--mix", "periodogram:1,dense:2,assimilate:1",
             "--samples", "100", "--frequencies", "100", "--in", "32", "--out", "48", "--layers",
             "2", "--rows", "3", "--n", "20", "--m", "10", "--members", "8", "--method", "enkf",
             "--concurrency", "6", "--requests", "300", "--warmup", "0.2s", "--progress", "off",
             "--json", str(jsonl))
    (level,) = read_levels(jsonl)
    assert level["workload"] == "mix"
    assert level["requests"] == 300
    check_figures(level)
    assert set(level["by_op"]) == {"periodogram", "dense", "assimilate"}
    for op, f in level["by_op"].items():
        check_figures(f)
    assert sum(f["ok"] for f in level["by_op"].values()) == level["ok"]
    # dense:2 of 4: about half the requests (binomial sd ~9 of 300).
    assert 100 <= level["by_op"]["dense"]["ok"] <= 200
    assert level["run"]["prepared"]["dense_model"]["bytes"] > 0
    assert {m["name"] for m in client.list_models()} == models_before


def test_bad_flags_exit_2(server_target):
    for args in (["--bytes", "4Qi"], ["--mix", "echo:1"], ["--op", "mix"],
                 ["--concurrency", "0"], ["--op", "fft"], ["--op", "dense", "--split", "2"]):
        proc = run_load(server_target, *args, check=False, timeout=60)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.strip(), args


def test_unreachable_target_fails_fast():
    proc = run_load("127.0.0.1:1", "--connect-timeout", "1s", check=False, timeout=60)
    assert proc.returncode == 1
    assert "connect" in proc.stderr


def _skip_if_unimplemented(proc, what):
    if proc.returncode != 0 and "UNIMPLEMENTED" in proc.stderr:
        pytest.skip(f"{what} is not implemented by this server yet")


def test_handle_inputs(server_target, tmp_path):
    jsonl = tmp_path / "handle.jsonl"
    proc = run_load(server_target, "--op", "periodogram", "--samples", "100", "--frequencies",
                    "100", "--input", "handle", "--concurrency", "1,4", "--compare-echo", *SHORT,
                    "--json", str(jsonl), check=False)
    _skip_if_unimplemented(proc, "resident tensors")
    assert proc.returncode == 0, proc.stderr
    for level in read_levels(jsonl):
        assert level["run"]["input"] == "handle"
        check_figures(level)
        check_figures(level["echo"], expect_server_timings=False)
        # Inputs travel by handle: the requests are far smaller than their payload.
        assert level["request_bytes_per_s"] < level["payload_bytes_per_s"]


def test_discarded_outputs_return_peaks_only(server_target, tmp_path):
    """--output discard: the server keeps the power arrays, the peaks (--top-k) come back."""
    frequencies = 4000
    figures = {}
    for output in ("inline", "discard"):
        jsonl = tmp_path / f"{output}.jsonl"
        run_load(server_target, "--op", "periodogram", "--samples", "200", "--frequencies",
                 str(frequencies), "--top-k", "3", "--input", "handle", "--output", output,
                 "--concurrency", "2", *SHORT, "--json", str(jsonl))
        (level,) = read_levels(jsonl)
        assert level["run"]["output"] == output and level["run"]["periodogram"]["top_k"] == 3
        check_figures(level)
        figures[output] = level["response_bytes_per_s"] / level["requests_per_s"]
    # Inline: the float64 power comes back; discarded: a response of a few hundred bytes.
    assert figures["inline"] > 8 * frequencies
    assert figures["discard"] < 1000, figures


def _server_has_flag(flag):
    server = os.environ.get("GPUCOMPUTE_SERVER") or str(_REPO / "build/server/gpucompute-server")
    proc = subprocess.run([server, "--helpfull"], capture_output=True, text=True, timeout=60)
    return flag in proc.stdout + proc.stderr


def test_shared_memory_inputs_and_outputs(tmp_path):
    if not _server_has_flag("allow_shared_memory"):
        pytest.skip("this server has no --allow_shared_memory yet")
    jsonl = tmp_path / "shm.jsonl"
    with run_server(tmp_path, "--allow_shared_memory") as target:
        proc = run_load(target, "--op", "echo", "--bytes", "1Mi", "--input", "shm",
                        "--concurrency", "1,2", *SHORT, "--json", str(jsonl), check=False)
        _skip_if_unimplemented(proc, "shared memory")
        assert proc.returncode == 0, proc.stderr
    for level in read_levels(jsonl):
        assert level["run"]["input"] == "shm" and level["run"]["output"] == "shm"
        check_figures(level, expect_server_timings=False)
        assert level["request_bytes_per_s"] < level["payload_bytes_per_s"]


def test_dense_on_a_model_the_server_holds(tmp_path, rng):
    """--model NAME: the model given at the server's start (--model_manifest) is used as it is,
    nothing loaded or unloaded; a name the server does not hold fails every call NOT_FOUND."""
    from dense_util import random_layer
    from test_models_at_startup import write_manifest
    manifest = write_manifest(tmp_path / "m", [random_layer(rng, 32, 16, activation="relu")])
    jsonl = tmp_path / "held.jsonl"
    with run_server(tmp_path, f"--model_manifest=held={manifest}") as target:
        run_load(target, "--op", "dense", "--model", "held", "--in", "32", "--model-dtype", "float32",
                 "--rows", "2", "--concurrency", "2", *SHORT, "--json", str(jsonl))
        (level,) = read_levels(jsonl)
        check_figures(level)
        assert level["run"]["prepared"]["dense_model"] == {"name": "held", "loaded_by": "server"}
        run_load(target, "--op", "dense", "--model", "nowhere", "--in", "32", "--model-dtype",
                 "float32", "--concurrency", "1", *SHORT, "--json", str(tmp_path / "x.jsonl"),
                 check=False)
        (failed,) = read_levels(tmp_path / "x.jsonl")
        assert failed["ok"] == 0 and "NOT_FOUND" in failed["errors_by_code"], failed
        with gpucompute.Client(target) as c:
            assert [m["name"] for m in c.list_models()] == ["held"]
