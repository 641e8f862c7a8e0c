"""_roce.addressing: the rail address planner (expectations computed by hand)."""
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import addressing as A


def test_flat_rail_zero_host_zero():
    plan = A.plan({"supernet": "10.64.0.0/16", "rail_prefix": 19}, 8)
    assert A.host_plan(plan, "gpu000", 0)["rails"][0]["cidr"] == "10.64.0.2/19"
