"""tests/bench/results keeps only files that back published figures: at most 40, each listed in
the folder's README.md index, and every file the index names present."""
import os
import re

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench",
                       "results")
INDEX = os.path.join(RESULTS, "README.md")


def indexed_files():
    with open(INDEX) as f:
        return set(re.findall(r"^\| `([^`]+)` \|", f.read(), re.M))


def result_files():
    return {n for n in os.listdir(RESULTS) if n != "README.md"}


def test_at_most_forty_result_files():
    assert len(result_files()) <= 40, sorted(result_files())


def test_every_result_file_is_in_the_index():
    assert result_files() - indexed_files() == set()


def test_every_indexed_file_is_present():
    assert indexed_files() - result_files() == set()
