"""The Dockerfile and .dockerignore, checked offline (dockerfile_checks.py), and proof that the
checks fail on the mistakes they are for."""

import os

import pytest

import dockerfile_checks
import repo_facts


def _read(name):
    path = os.path.join(repo_facts.REPO, name)
    return open(path).read() if os.path.exists(path) else None


DOCKERFILE = _read("Dockerfile")
DOCKERIGNORE = _read(".dockerignore")


def test_dockerfile_passes(flags):
    assert dockerfile_checks.check(DOCKERFILE, DOCKERIGNORE, flags) == []


@pytest.mark.parametrize("old,new,message", [
    ("USER 10001:10001", "USER root", "USER root"),
    ("USER 10001:10001", "USER gpucompute", "numeric"),
    ("COPY scripts/install-deps.sh scripts/install-deps.sh",
     "COPY scripts/no-such.sh scripts/install-deps.sh", "not in the repository"),
    ("scripts/build.sh -DBUILD_TESTING=OFF", "cmake -S . -B build && ninja -C build", "exactly"),
    ("/opt/gpucompute/bin/gpucompute \\\n",
     "/opt/gpucompute/bin/gpucompute /opt/gpucompute/bin/no-such-tool \\\n",
     "not an executable the build installs"),
    ("/opt/gpucompute/bin/gpucompute \\\n",
     "/opt/gpucompute/bin/gpucompute /opt/gpucompute/bin/gpucompute-load \\\n",
     "copies ['gpucompute', 'gpucompute-load', 'gpucompute-server']"),
    ('CMD ["gpucompute", "health"', 'CMD ["gpucompute", "info"', "gpucompute health"),
    ('"127.0.0.1:50052"', '"127.0.0.1:50051"', "--health_port"),
    ('VOLUME ["/var/cache/gpucompute"]', 'VOLUME ["/data"]', "--kernel_cache_dir"),
    ('"--metrics_port=8002"', '"--metrics_port=8002", "--no_such_flag=1"', "--no_such_flag"),
    ("-runtime-${BASE_OS}", "-runtime-ubuntu22.04", "runtime twin"),
    ('ENTRYPOINT ["gpucompute-server"]', "ENTRYPOINT gpucompute-server", "exec form"),
])
def test_dockerfile_mistakes_fail(flags, old, new, message):
    assert old in DOCKERFILE
    errors = dockerfile_checks.check(DOCKERFILE.replace(old, new), DOCKERIGNORE, flags)
    assert any(message in e for e in errors), errors


def test_dockerignore_mistakes_fail(flags):
    assert any("missing" in e for e in dockerfile_checks.check(DOCKERFILE, None, flags))
    errors = dockerfile_checks.check(DOCKERFILE, DOCKERIGNORE.replace(".git/\n", ""), flags)
    assert any(".git/" in e for e in errors), errors
    errors = dockerfile_checks.check(DOCKERFILE, DOCKERIGNORE + "scripts/\n", flags)
    assert any("excluded by .dockerignore" in e for e in errors), errors
