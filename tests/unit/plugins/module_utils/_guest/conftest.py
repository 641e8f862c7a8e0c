"""Facts of the captured trees, read once per session (the planner never changes them; tests that
break them take a deep copy)."""
import copy

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect

_CACHE = {}


@pytest.fixture
def tree_facts(unpacked_tree):
    """tree_facts("hgx-h100-ref") -> a fresh deep copy of that tree's ansible_facts.gpufleet."""
    def _facts(name):
        if name not in _CACHE:
            facts, warnings = collect(unpacked_tree(name))
            assert warnings == [], warnings
            _CACHE[name] = facts
        return copy.deepcopy(_CACHE[name])
    return _facts
