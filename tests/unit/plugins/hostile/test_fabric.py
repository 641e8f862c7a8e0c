"""Hostile input to the fabric: failed captures (empty, binary, an error page, cut short), a capture
that loses most of the fleet, options and facts of the wrong types, a fabric.json written by hand,
and garbage given to the placement, hostlist and summary filters.

The module cases start from a real output folder (the SuperPOD capture of ../shared/realdata run
through the module) and assert, on every refusal, that each file's bytes and mtime are what they
were and no temporary file is left."""
import json
import os
import shutil

import pytest
from ansible.errors import AnsibleFilterError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible import constants as C
from ansible.parsing.yaml.loader import AnsibleLoader
from ansible.plugins.loader import fragment_loader, init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
from ansible.utils.plugin_docs import add_fragments

from ansible_collections.gpufleet.provision.plugins.filter import placement as _placement
from ansible_collections.gpufleet.provision.plugins.filter import summary as _summary
from ansible_collections.gpufleet.provision.plugins.filter import topology as _topology
from ansible_collections.gpufleet.provision.plugins.inventory import fabric as fabric_inventory
# what the filters import when first called, imported now: a finder installed by another test file
# (Ansible's, which cannot load this checkout's collection) must not meet them first
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import placement  # noqa: F401 pylint: disable=unused-import
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import report  # noqa: F401 pylint: disable=unused-import

COVERS = ["module:fabric_inventory", "inventory:fabric", "filter:fabric_place", "filter:hostlist",
          "filter:gate_summary", "filter:run_summary"]

SUPERPOD = os.path.join("ibnetdiscover", "superpod-h100-example.out")
GB200 = os.path.join("ibnetdiscover", "gb200-unset-descriptions.out")
OUTPUTS = ["fabric.json", "labels.json", "nccl.json", "summary.txt", "topology-block.conf", "topology.conf"]


_FIRST = {}


@pytest.fixture
def previous(realdata, run_module, tmp_path_factory, tmp_path):
    """A copy (mtimes kept) of the SuperPOD capture's output folder, made once by the module: (capture, folder)."""
    capture = os.path.join(realdata, SUPERPOD)
    if "dest" not in _FIRST:
        dest = str(tmp_path_factory.mktemp("fabric") / "out")
        outcome = run_module("fabric_inventory", {"ibnetdiscover": [capture], "dest": dest})
        assert not outcome.failed and sorted(os.listdir(dest)) == OUTPUTS, outcome
        _FIRST["dest"] = dest
    dest = str(tmp_path / "out")
    shutil.copytree(_FIRST["dest"], dest)
    return capture, dest


def snapshot(folder):
    """Every entry under folder -> (bytes of a regular file, else its mode; mtime_ns)."""
    out = {}
    for root, dirs, names in os.walk(folder):
        for name in names + dirs:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, folder)] = (handle.read(), st.st_mtime_ns)
            else:
                out[os.path.relpath(path, folder)] = (st.st_mode, st.st_mtime_ns)
    return out


def refused(run_module, clear_error, dest, args, *names, check=False):
    """The module fails with a clear error naming ``names``, and every file of dest is as it was."""
    before = snapshot(dest)
    outcome = run_module("fabric_inventory", dict(args, dest=dest), check=check)
    clear_error(outcome, *names)
    assert snapshot(dest) == before, "files changed before the failure"
    return outcome


def cut_superpod(capture, tmp_path, lines, tail=b""):
    with open(capture, "rb") as handle:
        data = handle.read().split(b"\n")
    path = tmp_path / "cut.out"
    path.write_bytes(b"\n".join(data[:lines]) + b"\n" + tail)
    return str(path)


# --- failed captures never wipe the topology --------------------------------------------------------

@pytest.mark.parametrize("name, data, why", [
    ("empty.out", b"", "empty (0 bytes)"),
    ("blank.out", b"\n \n", "empty (only blank lines)"),
    ("binary.out", b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4, "not text"),
    ("error.html", b"<!DOCTYPE html>\n<html><head><title>504 Gateway Time-out</title></head></html>\n",
     "no switch or HCA records"),
])
@pytest.mark.parametrize("check", [False, True])
def test_a_failed_capture_is_an_error_naming_the_file(previous, tmp_path, run_module, clear_error, name, data, why, check):
    _capture, dest = previous
    path = tmp_path / name
    path.write_bytes(data)
    refused(run_module, clear_error, dest, {"ibnetdiscover": [str(path)]}, str(path), why, check=check)


@pytest.mark.parametrize("lines, tail, why", [
    (5963, b"", "truncated record: the last record, ca e09d730300156ff6 at line 5963"),   # before its port line
    (5961, b"", "truncated record: the file ends with the header of a record"),
    (3000, b"", "truncated record"),
    (10, b"[1]\t\"H-e09d7303007a4bd8\"[1](e09d730", "truncated record: the last line is cut"),
])
def test_a_capture_cut_mid_node_is_an_error(previous, tmp_path, run_module, clear_error, lines, tail, why):
    capture, dest = previous
    path = cut_superpod(capture, tmp_path, lines, tail)
    refused(run_module, clear_error, dest, {"ibnetdiscover": [path]}, path, why)


def test_one_bad_capture_among_good_ones_changes_nothing(previous, tmp_path, run_module, clear_error):
    capture, dest = previous
    empty = tmp_path / "segment2.out"
    empty.write_bytes(b"")
    refused(run_module, clear_error, dest, {"ibnetdiscover": [capture, str(empty)]}, str(empty), "empty")


def test_a_capture_that_is_no_file_never_blocks(previous, tmp_path, run_module, clear_error):
    _capture, dest = previous
    fifo = str(tmp_path / "capture.fifo")
    os.mkfifo(fifo)
    refused(run_module, clear_error, dest, {"ibnetdiscover": [fifo]}, fifo, "not a readable file")
    refused(run_module, clear_error, dest, {"ibnetdiscover": [str(tmp_path)]}, str(tmp_path), "not a readable file")


# --- a new inventory that lost most of the fleet -----------------------------------------------------

def test_an_inventory_that_lost_most_hosts_is_refused_unless_allowed(previous, realdata, run_module, clear_error, succeeded):
    _capture, dest = previous
    # one GB200 node's own view (its adapter linked to nothing: no host, an isolated_hca anomaly) in
    # place of the SuperPOD segment's 119 hosts
    gb200 = os.path.join(realdata, GB200)
    outcome = refused(run_module, clear_error, dest, {"ibnetdiscover": [gb200]},
                      os.path.join(dest, "fabric.json"), "allow_shrink", "0 host(s) in the fabric, 0 of the 119")
    outcome = run_module("fabric_inventory", {"ibnetdiscover": [gb200], "dest": dest}, check=True)
    clear_error(outcome, "allow_shrink")                   # check mode predicts the refusal
    outcome = run_module("fabric_inventory", {"ibnetdiscover": [gb200], "dest": dest, "allow_shrink": True})
    succeeded(outcome)
    with open(os.path.join(dest, "fabric.json")) as handle:
        doc = json.load(handle)
    assert doc["nodes"] == {} and [a["kind"] for a in doc["anomalies"]] == ["isolated_hca"]
    assert not [n for n in os.listdir(dest) if n not in OUTPUTS]


def test_hosts_the_gate_knows_but_no_capture_shows_count_as_lost(previous, realdata, tmp_path, run_module, clear_error):
    """The gate's reports keep every host in fabric.json (not_in_fabric) when the capture is of the
    wrong segment; the Slurm files would lose them all: refused the same."""
    _capture, dest = previous
    with open(os.path.join(dest, "fabric.json")) as handle:
        hosts = sorted(json.load(handle)["nodes"])
    nodes = dict((h, {"report": {"status": "pass"}}) for h in hosts)
    refused(run_module, clear_error, dest, {"ibnetdiscover": [os.path.join(realdata, GB200)], "nodes": nodes},
            "allow_shrink", "0 host(s) in the fabric, 0 of the 119")


def test_a_broken_fabric_json_in_place_is_not_compared_but_said(previous, run_module, succeeded):
    capture, dest = previous
    with open(os.path.join(dest, "fabric.json"), "wb") as handle:
        handle.write(b"\x00\x01 not json")
    outcome = run_module("fabric_inventory", {"ibnetdiscover": [capture], "dest": dest})
    succeeded(outcome)
    assert outcome["changed_files"] == ["fabric.json"]
    assert "not readable as an earlier fabric.json" in json.dumps(outcome.get("warnings"))


def test_a_scheduler_file_broken_in_place_is_rewritten(previous, run_module, succeeded):
    capture, dest = previous
    with open(os.path.join(dest, "topology.conf"), "wb") as handle:
        handle.write(b"\xff\xfe\x00garbage")
    outcome = run_module("fabric_inventory", {"ibnetdiscover": [capture], "dest": dest})
    succeeded(outcome)
    assert outcome["changed_files"] == ["topology.conf"] and sorted(os.listdir(dest)) == OUTPUTS


# --- options and facts of the wrong types ------------------------------------------------------------

@pytest.mark.parametrize("args, names", [
    ({"block_sizes": [-4, 0]}, ["block_sizes", "-4"]),
    ({"block_sizes": [0]}, ["block_sizes", "0 is not a positive"]),
    ({"block_sizes": [4, 12]}, ["block_sizes", "12", "power of two"]),
    ({"block_sizes": ["many"]}, ["block_sizes"]),
    ({"samples": -1}, ["samples"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"facts": {"nics": [{"name": "mlx5_5", "rail": "five"}]}}}},
     ["a08-p1-dgx-04-c01", "facts.nics[0].rail", "integer"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"facts": {"nics": "mlx5_0"}}}}, ["a08-p1-dgx-04-c01", "facts.nics", "list"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"facts": {"nics": [None]}}}}, ["a08-p1-dgx-04-c01", "facts.nics[0]"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"facts": {"numa": ["node0"]}}}}, ["a08-p1-dgx-04-c01", "facts.numa"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"facts": {"netdevs": {"ib0": {"speed_mbps": "fast"}}}}}},
     ["a08-p1-dgx-04-c01", "facts.netdevs.ib0.speed_mbps"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"report": {"status": ["pass"]}}}}, ["a08-p1-dgx-04-c01", "report.status"]),
    ({"nodes": {"a08-p1-dgx-04-c01": "pass"}}, ["a08-p1-dgx-04-c01"]),
    ({"nodes": {"a08-p1-dgx-04-c01": {"facts": {"nics": [{"ports": [{"gids": "x"}]}]}}}},
     ["a08-p1-dgx-04-c01", "facts.nics[0].ports[0].gids"]),
    ({"rail_plans": {"a08-p1-dgx-04-c01": {"rails": "x"}}}, ["rail_plans", "a08-p1-dgx-04-c01", "rails"]),
    ({"rail_plans": {"a08-p1-dgx-04-c01": {"rails": [{"rail": 0}]}}}, ["rail_plans", "a08-p1-dgx-04-c01", "cidr"]),
    ({"cabling_plan": {"sus": {"su1": {"leaves": {"1.5": "leaf1"}}}}}, ["cabling_plan", "su1", "rail"]),
    ({"cabling_plan": {"sus": {"su1": {"leaves": {0: ["leaf1"]}}}}}, ["cabling_plan", "su1", "leaf"]),
    ({"cabling_plan": {"sus": {"su1": {"leaves": {0: "leaf1"}, "nodes": [["gpu1"]]}}}}, ["cabling_plan", "su1", "nodes"]),
    ({"cabling_plan": {"sus": {"su1": {"leaves": {0: "leaf1"}, "nodes": {"gpu1": True}}}}}, ["cabling_plan", "gpu1"]),
    ({"cabling_plan": ["su1"]}, ["cabling_plan"]),
    ({"non_compute_patterns": ["(unclosed"]}, ["non_compute_patterns"]),
    ({"nccl_ib_tc": 300}, ["roce_tc", "300"]),
])
def test_options_of_the_wrong_type_name_the_option_and_change_nothing(previous, run_module, clear_error, args, names):
    capture, dest = previous
    refused(run_module, clear_error, dest, dict(args, ibnetdiscover=[capture]), *names)


@pytest.mark.parametrize("make, why", [(os.mkfifo, "a FIFO"), (os.mkdir, "a folder"),
                                       (lambda p: os.symlink(p + ".gone", p), "a dangling symbolic link")])
def test_an_output_that_is_no_regular_file_is_never_read_or_replaced(previous, run_module, clear_error, make, why):
    capture, dest = previous
    path = os.path.join(dest, "topology.conf")
    os.remove(path)
    make(path)
    refused(run_module, clear_error, dest, {"ibnetdiscover": [capture]}, path, "not a regular file", why)


def test_dest_that_is_a_file(previous, tmp_path, run_module, clear_error):
    capture, _dest = previous
    path = tmp_path / "dest-file"
    path.write_text("mine")
    outcome = run_module("fabric_inventory", {"ibnetdiscover": [capture], "dest": str(path)})
    clear_error(outcome, str(path), "not a folder")
    assert path.read_text() == "mine"


# --- the inventory plugin on a fabric.json it cannot use --------------------------------------------

@pytest.fixture(scope="module")
def plugin_factory():
    """The plugin with its documented options registered (as tests/unit/plugins/inventory does). The
    collection finder that init_plugin_loader installs cannot load this checkout's collection: it is
    removed again when no test installed it before, so that the tests run after these still import."""
    installed = AnsibleCollectionConfig.collection_finder is not None
    init_plugin_loader([])
    docs = AnsibleLoader(fabric_inventory.DOCUMENTATION).get_single_data()
    add_fragments(docs, fabric_inventory.__file__, fragment_loader=fragment_loader)
    C.config.initialize_plugin_configuration_definitions("inventory", "gpufleet.provision.fabric", docs["options"])
    if not installed:
        _AnsibleCollectionFinder._remove()

    def make():
        plugin = fabric_inventory.InventoryModule()
        plugin._load_name = "gpufleet.provision.fabric"
        return plugin
    return make


def load_inventory(plugin_factory, tmp_path, data=None, make=None):
    """Parse a config naming tmp_path/fabric.json, written from ``data`` (bytes), or made by ``make(path)``."""
    path = tmp_path / "fabric.json"
    if data is not None:
        path.write_bytes(data)
    if make is not None:
        make(str(path))
    cfg = tmp_path / "site.fabric.yml"
    cfg.write_text("plugin: gpufleet.provision.fabric\npath: fabric.json\n")
    inventory = InventoryData()
    plugin_factory().parse(inventory, DataLoader(), str(cfg), cache=False)
    return inventory


def _doc(**changes):
    doc = {"schema": 1, "nodes": {"gpu001": {"status": "green", "su": "su1", "block": "su1-b1", "segments": ["s1"],
                                             "rails": [{"rail": 0, "leaf": "leaf1"}]}},
           "blocks": [{"name": "su1-b1", "su": "su1", "nodes": ["gpu001"]}], "sus": [], "anomalies": [],
           "policy": {"suspicious_hostnames": ["localhost"]}}
    doc.update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("data, make, why", [
    (None, None, "cannot read it"),                                     # missing
    (b"", None, "empty (0 bytes)"),
    (b"  \n", None, "empty"),
    (b"[1, 2]", None, "expected fabric.json schema 1"),
    (b"null", None, "expected fabric.json schema 1"),
    (b"\x00\xffbinary", None, "not JSON"),
    (b"<html>502</html>", None, "not JSON"),
    (b'{"schema": 1, "nodes": {"gpu001": {"status": "gr', None, "not JSON"),   # cut short
    (_doc(schema=2), None, "got schema 2"),
    (_doc(nodes=["gpu001"]), None, "nodes must be a mapping"),
    (_doc(nodes={"gpu001": "green"}), None, "nodes.gpu001 must be a mapping"),
    (_doc(nodes={"gpu001": {"rails": "x"}}), None, "nodes.gpu001.rails must be a list"),
    (_doc(nodes={"gpu001": {"rails": [{"leaf": ["a"]}]}}), None, "nodes.gpu001.rails[0].leaf"),
    (_doc(nodes={"gpu001": {"segments": "s1"}}), None, "nodes.gpu001.segments"),
    (_doc(anomalies="x"), None, "anomalies must be a list"),
    (_doc(anomalies=[{"kind": "unnamed_hca", "guid": ["x"]}]), None, "anomalies[0].guid"),
    (_doc(policy=["localhost"]), None, "policy must be a mapping"),
    (_doc(nodes={"": {"status": "green"}}), None, "node '' is not a host name"),
    (_doc(nodes={"gpu 001": {"status": "green"}}), None, "node 'gpu 001' is not a host name"),
    (_doc(nodes={"gpu001": {"status": ["green"]}}), None, "nodes.gpu001.status must be a string"),
    (None, os.mkfifo, "not a regular file"),
    (None, os.mkdir, "not a regular file"),
])
def test_a_fabric_json_it_cannot_use_is_a_parser_error_naming_the_file(plugin_factory, tmp_path, data, make, why):
    with pytest.raises(AnsibleParserError) as exc:
        load_inventory(plugin_factory, tmp_path, data, make)
    text = str(exc.value)
    assert str(tmp_path / "fabric.json") in text and why in text, text


def test_a_whole_fabric_json_still_loads(plugin_factory, tmp_path):
    inventory = load_inventory(plugin_factory, tmp_path, _doc())
    assert sorted(inventory.hosts) == ["gpu001"] and "leaf_leaf1" in inventory.groups


# --- filters --------------------------------------------------------------------------------------

def _filter_error(func, *args, **kwargs):
    with pytest.raises(AnsibleFilterError) as exc:
        func(*args, **kwargs)
    return str(exc.value)


PLACE_DOC = json.loads(_doc().decode())


@pytest.mark.parametrize("doc, count, kwargs, why", [
    ("fabric.json", 1, {}, "expected the fabric.json document"),
    ([], 1, {}, "expected the fabric.json document"),
    (dict(PLACE_DOC, blocks="x"), 1, {}, "blocks must be a list"),
    (dict(PLACE_DOC, blocks=[{"name": "b", "nodes": None}]), 1, {}, "blocks[0]: a block has a name and nodes"),
    (dict(PLACE_DOC, nodes={"gpu001": "green"}), 1, {}, "nodes.gpu001 must be a mapping"),
    (dict(PLACE_DOC, sus=[1]), 1, {}, "sus[0] must be a mapping"),
    (dict(PLACE_DOC, policy="x"), 1, {}, "policy must be a mapping"),
    (PLACE_DOC, 1.5, {}, "whole number"),
    (PLACE_DOC, True, {}, "whole number"),
    (PLACE_DOC, float("inf"), {}, "whole number"),
    (PLACE_DOC, "\u0661", {}, "whole number"),
    (PLACE_DOC, 0, {}, "1 or more"),
    (PLACE_DOC, 1, {"busy": [["gpu001"]]}, "busy"),
    (PLACE_DOC, 1, {"statuses": [["green"]]}, "statuses"),
    (PLACE_DOC, 1, {"statuses": ["purple"]}, "purple"),
])
def test_fabric_place_garbage(doc, count, kwargs, why):
    assert why in _filter_error(_placement.fabric_place, doc, count, **kwargs)


def test_fabric_place_right_result():
    assert _placement.fabric_place(PLACE_DOC, "1")["hosts"] == ["gpu001"]
    assert _placement.fabric_place(PLACE_DOC, 1.0)["hosts"] == ["gpu001"]      # Jinja arithmetic gives floats


@pytest.mark.parametrize("value", ["gpu001", None, {"gpu001": 1}, [None], [1], [""], ["gpu\u0661", "gpu\u0662"],
                                   ["gpu\u00b2"], ["gpu[1-2]"], ["a,b"], ["gpu 1"], ["n" + "9" * 5000]])
def test_hostlist_garbage(value):
    assert "hostlist: " in _filter_error(_topology.hostlist, value)


def test_hostlist_right_result():
    assert _topology.hostlist(["gpu002", "gpu001", "x-1.example"]) == "gpu[001-002],x-1.example"
    assert _topology.hostlist([]) == ""


RESULT = {"status": "pass", "node": "gpu001", "summary": "gpu001 READY", "red": []}


@pytest.mark.parametrize("results, kwargs, why", [
    ("gpu001", {}, "expected a list of validate_node results"),
    (None, {}, "expected a list"),
    (["pass"], {}, "item 0: not a validate_node result"),
    ([{"host": "gpu001"}], {}, "item 0: not a validate_node result (no status, summary or red checks; keys: host)"),
    ([{}], {}, "item 0: not a validate_node result"),
    ([{"summary": "x", "node": "gpu001"}], {}, "item 0 (node gpu001): status None is no verdict"),
    ([dict(RESULT, status="green")], {}, "status 'green' is no verdict"),
    ([dict(RESULT, status="fail", red="pcie.acs")], {}, "red must be the list of red checks"),
    ([dict(RESULT, status="fail", red=["pcie.acs"])], {}, "red[0] is not a red check"),
    ([{"status": "pass", "summary": "x"}], {}, "a verdict without its node"),
    ([RESULT], {"details": "maybe"}, "details must be true or false"),
])
def test_gate_summary_garbage(results, kwargs, why):
    assert why in _filter_error(_summary.gate_summary, results, **kwargs)


def test_gate_summary_right_result():
    failed = {"failed": True, "msg": "unreachable before the gate"}
    assert _summary.gate_summary([RESULT, failed]) == ["1 node(s) evaluated: 1 green, 0 red", "green: gpu001"]
    assert _summary.gate_summary({"gpu001": RESULT}) == ["1 node(s) evaluated: 1 green, 0 red", "green: gpu001"]


@pytest.mark.parametrize("hostvars, nodes, active, why", [
    ([], ["gpu001"], None, "expected hostvars"),
    ("gpu001", ["gpu001"], None, "expected hostvars"),
    ({}, "gpu001", None, "nodes must be a list of host names"),
    ({}, [["gpu001"]], None, "nodes must be a list of host names"),
    ({}, ["gpu001"], "gpu001", "active must be a list of host names"),
    ({"gpu001": {"__validate_result": "pass"}}, ["gpu001"], None, "host gpu001: __validate_result: not a validate_node result"),
    ({"gpu001": {"__validate_result": {"status": "ok", "red": []}}}, ["gpu001"], None, "status 'ok' is no verdict"),
    ({"gpu001": {"__validate_result": {"status": "fail", "red": [1]}}}, ["gpu001"], None, "host gpu001: __validate_result: red[0]"),
    ({"gpu001": {"gpufleet_reboot_requests": 5}}, ["gpu001"], None, "host gpu001: gpufleet_reboot_requests must be a list"),
    ({"gpu001": {"validate_report_dir": ["x"]}}, ["gpu001"], None, "host gpu001: validate_report_dir"),
    ({"localhost": {"__fabric_result": {"summary": {"anomalies": {"miscabled_rail": "many"}}}}}, ["gpu001"], None,
     "__fabric_result summary.anomalies.miscabled_rail: 'many' is not a count"),
])
def test_run_summary_garbage(hostvars, nodes, active, why):
    assert why in _filter_error(_summary.run_summary, hostvars, nodes, active)


def test_run_summary_right_result():
    hostvars = {"gpu001": {"__validate_result": {"skipped": True}, "gpufleet_reboot_required": "false"},
                "gpu002": {"__validate_result": dict(RESULT, node="gpu002")}}
    stats = _summary.run_summary(hostvars, ["gpu001", "gpu002"])["stats"]
    # a skipped gate is no verdict (NOT GATED); "false" from an INI inventory is false
    assert stats["counts"] == {"READY": 1, "QUARANTINED": 0, "FAILED": 0, "NOT GATED": 1}
    assert stats["reboot_pending"] == []
