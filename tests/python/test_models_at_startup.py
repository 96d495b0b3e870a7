"""Models given at start-up (--model_manifest NAME=PATH.json, the manifest of `gpucompute model
load`): served from the first call, with no LoadModel; a bad manifest stops the server with
the field named; in worker mode every worker loads them, a restarted one too (docs/server.md
"Models at start-up")."""

import json
import os
import signal
import subprocess
import time

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import STARTUP_TIMEOUT_S, _server_binary, backend, run_server
from dense_util import TOLERANCES, check, random_layer, reference


def write_manifest(folder, layers, dtype="float32"):
    """The layers as .npy files beside a manifest.json in `folder`; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, layer in enumerate(layers):
        entry = {"weight": f"w{i}.npy", "activation": layer["activation"],
                 "layernorm": bool(layer.get("layernorm"))}
        np.save(folder / f"w{i}.npy", layer["weight"])
        if layer.get("bias") is not None:
            np.save(folder / f"b{i}.npy", layer["bias"])
            entry["bias"] = f"b{i}.npy"
        entries.append(entry)
    path = folder / "manifest.json"
    path.write_text(json.dumps({"dtype": dtype, "layers": entries}))
    return path


def two_models(tmp_path, rng):
    mlp = [random_layer(rng, 24, 40, activation="gelu_tanh", layernorm=True),
           random_layer(rng, 40, 8, activation="none")]
    tiny = [random_layer(rng, 5, 3, activation="relu")]
    flag = (f"--model_manifest=mlp={write_manifest(tmp_path / 'mlp', mlp)},"
            f"tiny={write_manifest(tmp_path / 'tiny', tiny)}")
    return {"mlp": mlp, "tiny": tiny}, flag


def check_served(client, models, rng, calls=1):
    assert sorted(m["name"] for m in client.list_models()) == sorted(models)
    for name, layers in models.items():
        # 16 rows: the relu model's outputs are then never all zero (which has no relative
        # error: 3 rows of 3 outputs were, one draw in 512).
        x = rng.standard_normal((16, layers[0]["weight"].shape[0])).astype(np.float32)
        for _ in range(calls):
            check(client.dense(name, x), reference(layers, x), TOLERANCES["float32"], name)


def test_models_of_the_manifests_are_served_from_the_first_call(tmp_path, rng):
    models, flag = two_models(tmp_path, rng)
    (tmp_path / "server").mkdir()
    with run_server(tmp_path / "server", flag) as target:
        with gpucompute.Client(target, timeout=60.0) as client:
            client.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            check_served(client, models, rng)
            client.unload_model("tiny")  # an ordinary model from then on
            with pytest.raises(grpc.RpcError) as e:
                client.dense("tiny", np.zeros((1, 5), np.float32))
            assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("problem", ["missing file", "unknown key", "no name", "bad shape"])
def test_a_bad_manifest_stops_the_server_naming_it(tmp_path, rng, problem):
    path = write_manifest(tmp_path / "m", [random_layer(rng, 6, 4)])
    manifest = json.loads(path.read_text())
    entry, expected = f"m={path}", "layers[0]"
    if problem == "missing file":
        (tmp_path / "m" / "w0.npy").unlink()
        expected = "w0.npy"
    elif problem == "unknown key":
        manifest["layers"][0]["activations"] = "relu"
        expected = 'layers[0]: unknown key "activations"'
    elif problem == "no name":
        entry, expected = str(path), "expected NAME=PATH.json"
    else:  # the second layer's input does not match the first's output: the server's rule
        np.save(tmp_path / "m" / "w1.npy", np.ones((5, 2), np.float32))
        manifest["layers"].append({"weight": "w1.npy"})
        expected = "layers[1]"
    path.write_text(json.dumps(manifest))
    proc = subprocess.run([_server_binary(), "--address=127.0.0.1:0", f"--backend={backend()}",
                           f"--model_manifest={entry}"], capture_output=True, text=True,
                          timeout=STARTUP_TIMEOUT_S)
    assert proc.returncode != 0
    log = proc.stdout + proc.stderr
    assert "--model_manifest" in log and expected in log, log


def test_every_worker_loads_them_a_restarted_one_too(tmp_path, rng):
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    models, flag = two_models(tmp_path, rng)
    (tmp_path / "server").mkdir()
    with run_server(tmp_path / "server", flag, "--workers=2", "--cpu_threads=1") as target:
        with gpucompute.Client(target, timeout=60.0) as client:
            client.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            check_served(client, models, rng, calls=4)  # least-loaded routing visits both
            victim = client.server_info()["workers"][1]
            os.kill(int(victim["pid"]), signal.SIGKILL)
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while time.monotonic() < deadline:
                w = client.server_info()["workers"][1]
                if w["restarts"] == victim["restarts"] + 1 and w["state"] == "serving":
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"worker 1 not serving again: {client.server_info()['workers']}")
            # Both serve the models again; the restarted one's own copy (its ListModels).
            check_served(client, models, rng, calls=6)
            assert client.server_info()["workers"][1]["pid"] != victim["pid"]
