"""Test bootstrap shared by every test folder.

- Makes ``ansible_collections.gpufleet.provision`` importable from this checkout (a symlink under
  .build/, the same one the Makefile and ansible-test use) and the lab harness (``lab.*``).
- ``unpacked_tree(name)``: unpacks tests/fixtures/trees/<name>.ttar into a temporary folder.
- ``realdata``: tests/fixtures/realdata, the real captures the tests read (third parties' files whose
  licence allows redistribution; tests/fixtures/realdata/README.md gives each one's source and licence).
"""
import os
import shutil
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, ".build")
COLL = os.path.join(BUILD, "ansible_collections", "gpufleet", "provision")
TREES = os.path.join(REPO, "tests", "fixtures", "trees")
# Real captures made by third parties (same layout as the team's ../shared/realdata, of which it holds
# the files the tests read and may redistribute).
REALDATA = os.path.join(REPO, "tests", "fixtures", "realdata")

if not os.path.lexists(COLL):
    os.makedirs(os.path.dirname(COLL), exist_ok=True)
    os.symlink(REPO, COLL)
for path in (BUILD, REPO):
    if path not in sys.path:
        sys.path.insert(0, path)

from lab.hw import ttar  # noqa: E402  (needs sys.path above)


# A tree has thousands of small files: on tmpfs they unpack 15x faster than on the disk.
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def unpacked_tree():
    """Factory: unpacked_tree("hgx-h100-ref") -> path of a fresh, writable copy of that captured tree."""
    made = []

    def _unpack(name):
        dest = tempfile.mkdtemp(prefix="gpufleet-%s-" % name, dir=FAST_TMP)
        made.append(dest)
        with open(os.path.join(TREES, name + ".ttar")) as handle:
            ttar.unpack(handle.read(), dest)
        return dest
    yield _unpack
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def realdata():
    """Path of tests/fixtures/realdata (part of every checkout: never skipped)."""
    return REALDATA
