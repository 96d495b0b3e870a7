"""What the deploy checks compare manifests against: the server's flags, its metric names, and
the executables the build installs, read from the built server or the sources."""

import glob
import os
import re
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

def server_flags(server_binary=None):
    """Flag names the server accepts: from `gpucompute-server --helpfull` when the binary is
    given (it also knows Abseil's own flags), else every ABSL_FLAG in server/'s sources."""
    if server_binary and os.path.exists(server_binary):
        # --helpfull prints the flags and exits 1.
        out = subprocess.run([server_binary, "--helpfull"], capture_output=True, text=True,
                             timeout=60).stdout
        flags = set(re.findall(r"^\s+--(\w+) \(", out, re.M))
        if not flags:
            raise RuntimeError(f"no flags in {server_binary} --helpfull")
    else:
        flags = set()
        for path in glob.glob(os.path.join(REPO, "server", "**", "*.cc"), recursive=True):
            with open(path) as f:
                flags |= set(re.findall(r"ABSL_FLAG\(\s*[\w:<>\s]+?,\s*(\w+)\s*,", f.read()))
    return flags


def project_version():
    """The project's version, from the top CMakeLists.txt's project() call."""
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpucompute VERSION ([0-9.]+)", f.read()).group(1)


def metric_names():
    """The Prometheus families the server registers (server/metrics/*.cc)."""
    names = set()
    for path in glob.glob(os.path.join(REPO, "server", "metrics", "*.cc")):
        with open(path) as f:
            names |= set(re.findall(r'"(gpucompute_[a-z0-9_]+)"', f.read()))
    return names


def installed_executables():
    """Executables that a build without tests makes and installs into bin/: add_executable and
    install(TARGETS ... RUNTIME DESTINATION bin) in a CMakeLists.txt outside tests/."""
    built, installed = set(), set()
    for path in glob.glob(os.path.join(REPO, "**", "CMakeLists.txt"), recursive=True):
        rel = os.path.relpath(path, REPO)
        if rel.startswith(("tests", "build")) or "/build" in rel:
            continue
        with open(path) as f:
            text = re.sub(r"#.*", "", f.read())
        built |= set(re.findall(r"add_executable\(\s*([\w-]+)", text))
        for targets in re.findall(r"install\(\s*TARGETS\s+([^)]*?)\s+RUNTIME\s+DESTINATION\s+bin",
                                  text):
            installed |= set(targets.split())
    return built & installed


def flag_args(args):
    """{name: value} of `--name=value` / `--name` (value None) arguments; also the list of
    names in order, to find duplicates."""
    names, values = [], {}
    for a in args:
        m = re.fullmatch(r"--(\w+)(?:=(.*))?", a)
        if m:
            names.append(m.group(1))
            values[m.group(1)] = m.group(2)
    return values, names
