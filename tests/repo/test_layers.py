"""The source tree keeps its layers: scripts/check-layers.py passes on the repository and fails,
naming the file and the include, on a copy with one include pointing up."""
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(REPO, "scripts", "check-layers.py")


def run_check(repo):
    return subprocess.run([sys.executable, CHECK, repo], capture_output=True, text=True)


def copy_sources(tmp_path):
    """The folders the check reads, sources only."""
    for top in ("math", "common", "proto", "kernels", "server", "client"):
        shutil.copytree(os.path.join(REPO, top), tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.png"))
    return tmp_path


def test_every_include_points_down():
    result = run_check(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every include points down" in result.stdout


def test_an_include_upward_fails(tmp_path):
    repo = copy_sources(tmp_path)
    kernel = repo / "kernels" / "peak_reduce.cu"
    kernel.write_text('#include "server/runtime/scheduler.h"\n' + kernel.read_text())
    result = run_check(str(repo))
    assert result.returncode == 1
    assert "kernels/peak_reduce.cu:1: kernels includes server/runtime/scheduler.h" in result.stdout


def test_siblings_may_not_include_each_other(tmp_path):
    repo = copy_sources(tmp_path)
    front = repo / "server" / "front" / "request_route.cc"
    front.write_text('#include "server/service/call_timing.h"\n' + front.read_text())
    client = repo / "client" / "cpp" / "tensor_util.cc"
    client.write_text('#include "kernels/top_peaks.cuh"\n' + client.read_text())
    result = run_check(str(repo))
    assert result.returncode == 1
    assert "server/front/request_route.cc:1: server/front includes server/service/call_timing.h" \
        in result.stdout
    assert "client/cpp/tensor_util.cc:1: client/cpp includes kernels/top_peaks.cuh" in result.stdout
