"""guest_plan through Ansible itself: facts read through root or given, check mode, errors."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect


@pytest.mark.parametrize("check", [False, True])
def test_plans_the_mini_host_through_root(adhoc, unpacked_tree, check):
    root = unpacked_tree("guest-mini")
    rc, result = adhoc("guest_plan", {"root": root, "requests": [{"name": "g1", "gpus": 2, "vcpus": 8}],
                                      "reserve_host_cpus": 0, "devices": "stand-in", "memory": "ram"}, check=check)
    assert rc == 0, result
    assert result["changed"] is False
    plan, = result["plans"]
    assert [(v["vcpu"], v["host_cpu"]) for v in plan["vcpus"][:2]] == [(0, 0), (1, 4)]
    guest, = result["guests"]
    assert sorted(guest) == ["cloud_hypervisor_args", "libvirt_xml", "name", "qemu_args", "qemu_pin_script", "vm_config"]
    assert "virtio-rng-pci,id=gpu0,bus=gpu0-port,addr=0.0" in guest["qemu_args"]
    assert "<vcpupin vcpu=\"1\" cpuset=\"4\" />" in guest["libvirt_xml"]


def test_facts_given_and_one_format(adhoc, unpacked_tree):
    facts = collect(unpacked_tree("hgx-h100-ref"))[0]
    rc, result = adhoc("guest_plan", {"facts": facts, "root": "/nonexistent", "format": ["cloud_hypervisor"],
                                      "requests": [{"name": "a", "gpus": 1}, {"name": "b", "gpus": 1}]})
    assert rc == 0, result
    assert [p["host"]["numa_nodes"] for p in result["plans"]] == [[0], [1]]
    assert [sorted(g) for g in result["guests"]] == [["cloud_hypervisor_args", "name", "vm_config"]] * 2
    assert result["guests"][1]["vm_config"]["cpus"]["affinity"][:2] == [{"vcpu": 0, "host_cpus": [13]}, {"vcpu": 1, "host_cpus": [117]}]


def test_reserve_as_text(adhoc, unpacked_tree):
    # an inventory variable or -e value arrives as text: "0,1" is a list of host CPUs
    root = unpacked_tree("hgx-h100-ref")
    rc, result = adhoc("guest_plan", {"root": root, "requests": [{"name": "a", "gpus": 1}], "reserve_host_cpus": "0,1",
                                      "format": []})
    assert rc == 0, result
    assert result["plans"][0]["host"]["reserved_cpus"] == [0, 1, 104, 105]
    assert result["guests"] == [{"name": "a"}]


def test_short_request_fails_naming_it(adhoc, unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    rc, result = adhoc("guest_plan", {"root": root, "requests": [{"name": "a", "gpus": 8}, {"name": "g3", "gpus": 1}]})
    assert rc != 0
    assert result["msg"] == "guest g3: 1 GPU requested, 0 GPU-NIC pairs free"
    assert "plans" not in result


def test_bad_root_fails_clearly(adhoc):
    rc, result = adhoc("guest_plan", {"root": "/definitely/not/here", "requests": [{"name": "a"}]})
    assert rc != 0
    assert result["msg"].startswith("root /definitely/not/here: not a folder")
