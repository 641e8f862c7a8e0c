"""What the fabric role promises (roles/fabric/README.md): a fabric.json that follows its schema,
every twin on its rails, the lab's miscabled rail found, Slurm files naming the nodes."""
import json
import os

import jsonschema

testinfra_hosts = ["ansible://molecule"]
OUT = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"), "out", "fabric")
SCHEMA = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), "docs", "fabric.schema.json")


def _fabric():
    with open(os.path.join(OUT, "fabric.json")) as handle:
        return json.load(handle)


def test_fabric_json_follows_its_schema():
    with open(SCHEMA) as handle:
        jsonschema.validate(_fabric(), json.load(handle))


def test_the_capture_was_taken_on_the_node(host):
    # the collect entry point ran ibnetdiscover on twin4 and kept it on the controller
    assert host.run("command -v ibnetdiscover").rc == 0
    capture = os.path.join(os.path.dirname(OUT), "captures", "ibnetdiscover", "lab.out")
    with open(capture) as handle:
        assert '"twin4 mlx5_0"' in handle.read()


def test_every_twin_is_a_node_and_the_miscabled_rail_is_found():
    fabric = _fabric()
    hosts = sorted(n["host"] for n in fabric["nodes"]) if isinstance(fabric["nodes"], list) else sorted(fabric["nodes"])
    assert hosts == ["twin1", "twin2", "twin3", "twin4"]
    miscabled = [a for a in fabric["anomalies"] if a["kind"] == "miscabled_rail"]
    assert [(a["host"], a["hca"]) for a in miscabled] == [("twin3", "mlx5_3")]


def test_slurm_topology_names_the_nodes():
    with open(os.path.join(OUT, "topology.conf")) as handle:
        text = handle.read()
    assert "SwitchName=" in text and "twin" in text
