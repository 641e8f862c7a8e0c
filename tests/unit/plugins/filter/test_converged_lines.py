"""converged_lines: the converged nodes as one hostlist, then each node to wash; by hand."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import converged_lines as lines_flt


def test_converged_lines_hostlist_then_each_node_to_wash():
    results = [{"converged": True}, {"converged": True}, {"converged": False, "converged_reasons": ["a", "b", "c", "d"]},
               {"skipped": True, "skip_reason": "Conditional result was False"}]
    assert lines_flt.converged_lines(results, ["gpu001", "gpu002", "gpu003", "gpu004"]) == [
        "converged: gpu[001-002] (2): green and unchanged since the last green run; nothing to wash, no reboot,"
        " this was their gate",
        "wash: gpu003: a; b; c",
        "wash: gpu004: Conditional result was False",
    ]
    assert lines_flt.converged_lines([{}], ["gpu001"]) == ["wash: gpu001: not asked"]
    with pytest.raises(AnsibleFilterError, match="one result per host"):
        lines_flt.converged_lines([{}], ["gpu001", "gpu002"])
