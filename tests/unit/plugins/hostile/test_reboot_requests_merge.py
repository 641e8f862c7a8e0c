"""Hostile input to the reboot_requests_merge filter: a careless inventory's gpufleet_reboot_requests
or a module's odd reboot_reasons ends in AnsibleFilterError naming the role and the value, never a
TypeError, KeyError or a silent request."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter.reboot_requests_merge import FilterModule

COVERS = ["filter:reboot_requests_merge"]

merge = FilterModule().filters()["reboot_requests_merge"]


@pytest.mark.parametrize("requests", [
    "yes", 1, {"kernel": "reboot"}, [None], [{"role": 1, "reason": "x"}], [{"role": "a", "reason": None}],
    [{"role": "a"}], [["kernel", "reason"]],
])
def test_garbage_requests_fail_naming_the_value(requests):
    with pytest.raises(AnsibleFilterError, match=r"reboot_requests_merge\('tuning'\).*gpufleet_reboot_requests"):
        merge(requests, "tuning", ["THP madvise applies at the next boot"])


@pytest.mark.parametrize("reasons", ["one text", b"bytes", 3, {"a": 1}, [None], [""], ["  "], [["nested"]], None])
def test_garbage_reasons_fail_naming_the_value(reasons):
    with pytest.raises(AnsibleFilterError, match=r"reboot_requests_merge\('tuning'\)"):
        merge([], "tuning", reasons)


@pytest.mark.parametrize("role", [None, "", "   ", 5, ["kernel"]])
def test_garbage_role_fails(role):
    with pytest.raises(AnsibleFilterError, match="non-empty name"):
        merge([], role, ["x"])


def test_a_huge_list_is_merged_not_refused():
    requests = [{"role": "r%d" % i, "reason": "x"} for i in range(5000)]
    assert len(merge(requests, "r1", [])) == 4999
