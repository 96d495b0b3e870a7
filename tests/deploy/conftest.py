"""Shared fixtures of the deploy checks. $GPUCOMPUTE_SERVER (set by CTest) is the built server,
whose --helpfull lists its flags; without it the flags are read from the sources."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import repo_facts  # noqa: E402


@pytest.fixture(scope="session")
def flags():
    return repo_facts.server_flags(os.environ.get("GPUCOMPUTE_SERVER"))
