"""Astropy's own LombScargle tests against ``gpucompute.LombScargle``: the test files Astropy
installs (test_lombscargle.py, test_statistics.py), their one import of Astropy's class swapped
for ours, run by pytest against the session's server: every test passes (but one Astropy
skips itself)."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ASTROPY_IMPORT = "from astropy.timeseries.periodograms.lombscargle import LombScargle"
OUR_IMPORT = "from gpucompute import LombScargle"
FILES = ("test_lombscargle.py", "test_statistics.py")


def _astropy_tests():
    """The directory of Astropy's installed LombScargle tests, or skip saying what is missing."""
    spec = importlib.util.find_spec("astropy")
    if spec is None:
        pytest.skip("astropy is not installed (Debian: python3-astropy)")
    folder = pathlib.Path(spec.submodule_search_locations[0]) / (
        "timeseries/periodograms/lombscargle/tests")
    if not all((folder / name).is_file() for name in FILES):
        pytest.skip(f"Astropy's LombScargle test files are not installed under {folder}")
    return folder


@pytest.mark.parametrize("name", FILES)
def test_astropys_lombscargle_tests_pass_with_our_class(name, client, tmp_path):
    source = (_astropy_tests() / name).read_text()
    assert source.count(ASTROPY_IMPORT) == 1, f"{name}: Astropy's import is not where expected"
    (tmp_path / name).write_text(source.replace(ASTROPY_IMPORT, OUR_IMPORT))
    package = pathlib.Path(sys.modules["gpucompute"].__file__).parent.parent
    env = {**os.environ, "GPUCOMPUTE_TARGET": client.target,
           "PYTHONPATH": os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf",
         "--rootdir", str(tmp_path), str(tmp_path / name)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=800)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode == 0, f"{name}: {summary}\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 100, f"{name}: only {summary}"  # the file's tests ran, not a skip
    print(f"{name}: {summary}")
