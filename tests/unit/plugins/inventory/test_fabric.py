"""fabric inventory plugin, loaded through Ansible's plugin loader, on fabric.json files made by the model."""
import json
import os
import sys

import pytest
from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible import constants as C
from ansible.parsing.yaml.loader import AnsibleLoader
from ansible.plugins.loader import fragment_loader, init_plugin_loader
from ansible.utils.plugin_docs import add_fragments

from ansible_collections.gpufleet.provision.plugins.inventory import fabric as fabric_inventory
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs as _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
import ibnetgen  # noqa: E402


@pytest.fixture(scope="module")
def plugin_factory():
    """The plugin with its documented options registered, as Ansible's loader does.

    The loader itself cannot be used here: the test session already imported
    ``ansible_collections`` from .build as a plain package, before Ansible's collection finder.
    The options, their defaults and the ``constructed`` doc fragment still come from Ansible.
    """
    init_plugin_loader([])
    docs = AnsibleLoader(fabric_inventory.DOCUMENTATION).get_single_data()
    add_fragments(docs, fabric_inventory.__file__, fragment_loader=fragment_loader)
    C.config.initialize_plugin_configuration_definitions("inventory", "gpufleet.provision.fabric", docs["options"])

    def make():
        plugin = fabric_inventory.InventoryModule()
        plugin._load_name = "gpufleet.provision.fabric"
        return plugin
    return make


def write(tmp_path, config, doc):
    (tmp_path / "fabric.json").write_text(json.dumps(doc))
    cfg = tmp_path / "site.fabric.yml"
    cfg.write_text(config)
    return str(cfg)


def load(plugin_factory, path):
    inventory = InventoryData()
    plugin_factory().parse(inventory, DataLoader(), path, cache=False)
    return inventory


def doc():
    """gpu00002 fails the gate; gpu00004's rail-0 NIC is on the rail-1 leaf (quarantined by the fabric);
    gpu00002's rail-1 adapter says "localhost mlx5_1" and an extra adapter never got a description."""
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=2, rails=2)
    fab.move(info["nic"][("gpu00004", 0)], info["leaf"][(2, 1)], 20)
    fab.set_desc(info["nic"][("gpu00002", 1)], "localhost mlx5_1")
    unnamed = fab.ca("MT4129 ConnectX7   Mellanox Technologies", guid="e09d7303000000aa")
    fab.link(info["leaf"][(2, 0)], 21, unnamed, 1)
    nodes = {"gpu00001": {"report": {"status": "pass"}}, "gpu00002": {"report": {"status": "fail"}}}
    return _fabric.analyze([parse(fab.text(), "seg.out")], nodes=nodes)


def members(inventory, group):
    return sorted(h.name for h in inventory.groups[group].get_hosts()) if group in inventory.groups else None


def test_groups_by_status_leaf_rail_su_block(tmp_path, plugin_factory):
    d = doc()
    inv = load(plugin_factory, write(tmp_path, "plugin: gpufleet.provision.fabric\npath: fabric.json\n", d))
    assert members(inv, "status_green") == ["gpu00001"]
    # gpu00002 misses rail 1 (its adapter there has a default name); gpu00004 is miscabled
    assert members(inv, "status_quarantined") == ["gpu00002", "gpu00004"]
    assert members(inv, "quarantined_by_fabric") == ["gpu00002", "gpu00004"]
    assert inv.get_host("gpu00002").vars["fabric"]["quarantined_by"] == ["gate", "fabric"]
    assert members(inv, "anomaly_miscabled_rail") == ["gpu00004"]
    assert members(inv, "anomaly_missing_rail") == ["gpu00002", "gpu00004"]
    assert members(inv, "status_unknown") == ["gpu00003"]
    assert members(inv, "leaf_leaf_r0_su1") == ["gpu00001", "gpu00002"]
    assert members(inv, "leaf_leaf_r1_su2") == ["gpu00003", "gpu00004"]   # gpu00004's rail 0 NIC sits there too
    assert members(inv, "rail_0") == ["gpu00001", "gpu00002", "gpu00003", "gpu00004"]
    assert members(inv, "su_su2") == ["gpu00003", "gpu00004"]
    assert members(inv, "block_%s" % d["nodes"]["gpu00004"]["block"].replace("-", "_")) == ["gpu00004"]
    assert members(inv, "segment_seg") == ["gpu00001", "gpu00002", "gpu00003", "gpu00004"]
    assert inv.get_host("gpu00003").vars["fabric"]["su"] == "su2"
    quarantine = inv.get_host("gpu00004").vars["fabric"]["quarantine"]
    assert quarantine == ["miscabled_rail:gpu00004/mlx5_0", "missing_rail:gpu00004/rail0"]


def test_adapters_without_a_host_name_are_groups_keyed_by_guid_never_hosts(tmp_path, plugin_factory):
    d = doc()
    localhost_guid = [a["guid"] for a in d["anomalies"] if a["kind"] == "suspicious_hostname"][0]
    inv = load(plugin_factory, write(tmp_path, "plugin: gpufleet.provision.fabric\npath: fabric.json\n", d))
    assert sorted(inv.hosts) == ["gpu00001", "gpu00002", "gpu00003", "gpu00004"]
    assert "localhost" not in inv.hosts
    adapters = sorted(g.name for g in inv.groups["unmapped_adapters"].child_groups)
    assert adapters == sorted(["adapter_e09d7303000000aa", "adapter_" + localhost_guid])
    var = inv.groups["adapter_" + localhost_guid].get_vars()["fabric_adapter"]
    assert (var["kind"], var["desc"], var["switch"], var["su"], var["rail"]) == (
        "suspicious_hostname", "localhost mlx5_1", "leaf-r1-su1", "su1", 1)
    assert var["id"] == "suspicious_hostname:" + localhost_guid
    assert inv.groups["adapter_e09d7303000000aa"].get_hosts() == []
    # A node named like a default host name (facts mapped it, or an old fabric.json) is no host either.
    d["nodes"]["ubuntu"] = dict(d["nodes"]["gpu00001"])
    inv = load(plugin_factory, write(tmp_path, "plugin: gpufleet.provision.fabric\npath: fabric.json\n", d))
    assert "ubuntu" not in inv.hosts and "gpu00001" in inv.hosts


def test_constructable_and_status_filter(tmp_path, plugin_factory):
    config = """plugin: gpufleet.provision.fabric
path: fabric.json
statuses: [green, quarantined]
group_prefix: fab_
keyed_groups:
  - key: fabric.su
    prefix: pod
compose:
  fabric_rail_count: fabric.rails | length
groups:
  needs_attention: fabric.status != 'green'
"""
    inv = load(plugin_factory, write(tmp_path, config, doc()))
    assert sorted(inv.hosts) == ["gpu00001", "gpu00002", "gpu00004"]
    assert members(inv, "fab_status_green") == ["gpu00001"]
    assert members(inv, "pod_su1") == ["gpu00001", "gpu00002"]
    assert members(inv, "needs_attention") == ["gpu00002", "gpu00004"]
    assert inv.get_host("gpu00001").vars["fabric_rail_count"] == 2


def test_wrong_schema_and_missing_file(tmp_path, plugin_factory):
    path = write(tmp_path, "plugin: gpufleet.provision.fabric\npath: fabric.json\n", {"schema": 99, "nodes": {}})
    with pytest.raises(AnsibleParserError, match="expected fabric.json schema 1"):
        load(plugin_factory, path)
    cfg = tmp_path / "other.fabric.yml"
    cfg.write_text("plugin: gpufleet.provision.fabric\npath: missing.json\n")
    with pytest.raises(AnsibleParserError, match="missing.json: cannot read it"):
        load(plugin_factory, str(cfg))


def test_verify_file_wants_fabric_yml(tmp_path, plugin_factory):
    other = tmp_path / "hosts.yml"
    other.write_text("x")
    assert not plugin_factory().verify_file(str(other))
    good = tmp_path / "site.fabric.yml"
    good.write_text("x")
    assert plugin_factory().verify_file(str(good))


def test_real_files_from_render(tmp_path, plugin_factory):
    files = _fabric_outputs.render(doc())[0]
    (tmp_path / "fabric.json").write_text(files["fabric.json"].text())
    cfg = tmp_path / "r.fabric.yml"
    cfg.write_text("plugin: gpufleet.provision.fabric\npath: fabric.json\n")
    inv = load(plugin_factory, str(cfg))
    assert len(inv.hosts) == 4
