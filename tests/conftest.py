"""Test bootstrap shared by every test folder.

- Makes ``ansible_collections.gpufleet.provision`` importable from this checkout (a symlink under
  .build/, the same one the Makefile and ansible-test use) and the lab harness (``lab.*``).
- ``unpacked_tree(name)``: unpacks tests/fixtures/trees/<name>.ttar into a temporary folder.
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, ".build")
COLL = os.path.join(BUILD, "ansible_collections", "gpufleet", "provision")
TREES = os.path.join(REPO, "tests", "fixtures", "trees")
SHARED = os.path.join(os.path.dirname(REPO), "shared")

if not os.path.lexists(COLL):
    os.makedirs(os.path.dirname(COLL), exist_ok=True)
    os.symlink(REPO, COLL)
for path in (BUILD, REPO):
    if path not in sys.path:
        sys.path.insert(0, path)

from lab.hw import ttar  # noqa: E402  (needs sys.path above)


@pytest.fixture
def unpacked_tree(tmp_path):
    """Factory: unpacked_tree("hgx-h100-ref") -> path of a fresh copy of that captured tree."""
    def _unpack(name):
        dest = tmp_path / name
        with open(os.path.join(TREES, name + ".ttar")) as handle:
            ttar.unpack(handle.read(), str(dest))
        return str(dest)
    return _unpack


@pytest.fixture
def realdata():
    """Path of ../shared/realdata, or skip with the reason when this checkout has none beside it."""
    path = os.path.join(SHARED, "realdata")
    if not os.path.isdir(path):
        pytest.skip("../shared/realdata is absent beside this checkout: real captures not available")
    return path
