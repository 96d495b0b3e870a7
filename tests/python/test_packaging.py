"""The Python client as a package: `pip install ./client/python` in a fresh virtual environment,
from a copy of the sources alone (no CMake build, the committed generated code), then a call
through a real server from that environment; the committed generated code is what
scripts/generate-python-stubs.sh writes from the current .proto files; the package's version
is the project's.

Run by CTest as `python_packaging`. Needs Debian's python3-venv, python3-setuptools and
python3-wheel (scripts/install-deps.sh): nothing is downloaded.
"""

import filecmp
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_REPO = pathlib.Path(__file__).resolve().parents[2]
_SOURCES = _REPO / "client/python"


def project_version():
    text = (_REPO / "CMakeLists.txt").read_text()
    return re.search(r"project\(gpucompute VERSION ([0-9.]+)", text).group(1)


def test_generated_code_is_what_the_script_writes(tmp_path):
    subprocess.run([str(_REPO / "scripts/generate-python-stubs.sh"), str(tmp_path)], check=True,
                   timeout=120)
    fresh, committed = tmp_path / "gpucompute/v1", _SOURCES / "gpucompute/v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.name != "__pycache__")
    assert {"compute_pb2.pyi", "tensor_pb2.pyi", "compute_pb2_grpc.py"} <= set(names)
    differing = [n for n in names if not filecmp.cmp(fresh / n, committed / n, shallow=False)]
    assert not differing, (f"client/python/gpucompute/v1/{differing} are out of date: run "
                           "scripts/generate-python-stubs.sh and commit the result")


def test_package_version_is_the_projects():
    text = (_SOURCES / "gpucompute/__init__.py").read_text()
    assert re.search(r'^__version__ = "([0-9.]+)"', text, re.M).group(1) == project_version()


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory):
    """The interpreter of a fresh venv (system site packages: grpcio, protobuf, NumPy from
    Debian) with the package pip-installed from a copy of client/python."""
    tmp = tmp_path_factory.mktemp("pip")
    sources = tmp / "python"
    shutil.copytree(_SOURCES, sources,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    python = venv / "bin/python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-index",
                           "--no-build-isolation", "--disable-pip-version-check", str(sources)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python


def run_in_venv(python, script, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not the build tree
    proc = subprocess.run([str(python), "-c", textwrap.dedent(script), *args], capture_output=True,
                          text=True, timeout=300, cwd=python.parent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_pip_installed_package_is_complete(venv_python):
    out = run_in_venv(venv_python, """
        import pathlib, gpucompute
        from gpucompute.v1 import compute_pb2, compute_pb2_grpc
        root = pathlib.Path(gpucompute.__file__).parent
        print(gpucompute.__version__, root)
        for name in ("py.typed", "v1/compute_pb2.pyi", "v1/tensor_pb2.pyi"):
            assert (root / name).is_file(), name
        """)
    version, root = out.split()
    assert version == project_version()
    assert "site-packages" in root and not root.startswith(str(_REPO)), root


def test_pip_installed_lombscargle_through_a_server_matches_astropy(venv_python, server_target):
    """LombScargle from the installed package, its server from $GPUCOMPUTE_TARGET; both exact
    (method "slow": Astropy's "auto" would take its approximate "fast" here)."""
    astropy_timeseries = pytest.importorskip("astropy.timeseries")
    rng = np.random.default_rng()
    t = np.sort(rng.uniform(0, 30, 300))
    dy = rng.uniform(0.1, 0.3, t.size)
    y = np.sin(2 * np.pi * 0.7 * t) + dy * rng.standard_normal(t.size)
    arrays = pathlib.Path(venv_python).parent.parent / "series.npy"
    np.save(arrays, np.stack([t, y, dy]))
    out = run_in_venv(venv_python, """
        import os, sys, numpy as np
        os.environ["GPUCOMPUTE_TARGET"] = sys.argv[2]
        from gpucompute import LombScargle
        t, y, dy = np.load(sys.argv[1])
        frequency, power = LombScargle(t, y, dy).autopower(method="slow", maximum_frequency=3.0)
        np.save(sys.argv[1], np.stack([frequency, power]))
        """, str(arrays), server_target)
    frequency, power = np.load(arrays)
    expected = astropy_timeseries.LombScargle(t, y, dy).power(frequency, method="slow")
    np.testing.assert_allclose(power, expected, rtol=0, atol=1e-9 * expected.max())
