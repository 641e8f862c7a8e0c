"""A private lab of one RoCE twin (model hgx-h100-roce) for the roce role, the gate and the fabric
inventory on real interfaces: the lab tests' lab (tests/integration/lab/conftest.py) with ports
shifted by +70 and containers named ``<prefix>roce-*``, its inventory cut down to one twin:

- ``roce1``: twin4's clean baseline (packages, BIOS, GRUB) on the RoCE model plus mlnx-tools (the
  lab's ``mlnx_qos``), host_index 3, the RoCE profile; dirty where RoCE is concerned: its rails (real
  veth interfaces, lab/twin/rails.py) have no address and MTU 1500, its NICs trust PCP, PFC off;
  and one rail cable on the wrong leaf: mlx5_3 (rail 3) on su1-leaf-r2 port 2.
- it is the fabric_capture host, collecting LLDP (the lab's leaves speak it, lab/twin/rails.py); the
  fabric play gets NCCL_IB_TC 106 and the RoCE profile's addressing plan (fabric_roce_profile).
"""
import importlib.util
import os

import pytest
import yaml

_SPEC = importlib.util.spec_from_file_location(
    "gpufleet_lab_conftest_roce_twin", os.path.join(os.path.dirname(__file__), "..", "lab", "conftest.py"))
_LAB = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_LAB)
_LAB.PORT_SHIFT += 70
_LAB.PREFIX += "roce-"
REPO = _LAB.REPO
HOST_INDEX = 3
PROFILE = ("{{ lookup('gpufleet.provision.profile', 'hgx-h100-roce') | combine({'name': 'hgx-h100-roce-lab', "
           "'os': {'id': 'debian', 'version_id': '12'}}) }}")


class RoceLab(_LAB.Lab):
    def write_inventory(self):
        super().write_inventory()
        path = os.path.join(self.inventory_dir, "hosts.yml")
        with open(path) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]
        roce1 = dict(group["hosts"]["twin4"], host_index=HOST_INDEX, gpufleet_profile=PROFILE)
        baseline = group["vars"]["gpufleet_lab_baseline"]
        roce1["gpufleet_lab_twin"] = {
            "bmc": roce1["gpufleet_lab_twin"]["bmc"], "model": "hgx-h100-roce",
            "faults": ["rails unaddressed at MTU 1500, QoS trust pcp and PFC off", "rail 3 cabled to su1-leaf-r2"],
            "packages": baseline["packages"] + ["mlnx-tools"],
            "state": {"cabling": {"mlx5_3": {"leaf": "su1-leaf-r2", "port": 2}}}}
        group["hosts"] = {"roce1": roce1}
        inv["all"]["children"]["fabric_capture"] = {
            "hosts": {"roce1": None},
            "vars": {"fabric_collect_lldp": True, "fabric_collect_ibnetdiscover": False}}
        # the controller-side fabric play (localhost): the profile's traffic class and addressing plan
        inv["all"]["vars"] = {"fabric_nccl_ib_tc": 106, "fabric_roce_profile": "hgx-h100-roce"}
        self.hosts = {"roce1": roce1}
        with open(path, "w") as handle:
            yaml.safe_dump(inv, handle, sort_keys=False)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The private RoCE lab (see the module docstring), torn down at the end."""
    yield from _LAB.lab_of(RoceLab, tmp_path_factory)
