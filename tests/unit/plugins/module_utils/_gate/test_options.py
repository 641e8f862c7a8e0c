"""validate_node's node name rule, the one the report writer (plugin_utils/gate_reports) applies too."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import options


@pytest.mark.parametrize("name", ["gpu001", "gpu001.rack1.example", "b08-p1-dgx-08-c01", "node_7", "a+b", "gpu:1@x"])
def test_host_names_can_name_reports(name):
    assert options.node_name_problem(name) is None


@pytest.mark.parametrize("name", ["gpu001\n", "../x", "a/b", ".", "..", "", None, "gpu 001", "-x", ".hidden"])
def test_names_that_are_no_single_file_name_are_refused(name):
    assert options.node_name_problem(name) == "%r is not a host name (letters, digits, . _ - : @ +; no /)" % (name,)
