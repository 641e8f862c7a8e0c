"""cloud-hypervisor's own API schema accepts every generated VmConfig, and the CLI form states the
same CPUs, zones and devices as the plan.

cloud-hypervisor is not packaged for Debian; its REST API's OpenAPI 3.0 description
(tests/fixtures/realdata/cloud-hypervisor/cloud-hypervisor.yaml, Apache-2.0) is: ``vm_config(plan)``
is validated against its ``VmConfig`` component with openapi-schema-validator (OAS 3.0 rules and
formats). The published schema leaves objects open (no ``additionalProperties: false``): a
misspelled key such as ``host_numa_nod`` would pass it and be ignored by the VMM, silently losing
the NUMA binding. So each config is also validated against a closed copy (every object allows only
the properties the API describes).
"""
import copy
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._guest.cloud_hypervisor import cli_args, vm_config
from ansible_collections.gpufleet.provision.tests.integration.guest.conftest import MINI_OPTIONS, REPO

import openapi_schema_validator  # noqa: E402  (requirements-test.txt)

REALDATA = os.path.join(REPO, "tests", "fixtures", "realdata")
# (tree, requests, options): every request size on the reference node, and the bootable model
CASES = [
    ("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS),
    ("guest-mini", [{"name": "ga", "gpus": 1}, {"name": "gb", "gpus": 1}], MINI_OPTIONS),
    ("hgx-h100-ref", [{"name": "all", "gpus": 8}], None),
    ("hgx-h100-ref", [{"name": "g%d" % i, "gpus": 1} for i in range(8)], None),
    ("hgx-h100-ref", [{"name": "a", "gpus": 4}, {"name": "b", "gpus": 2}, {"name": "c", "gpus": 1},
                      {"name": "d", "gpus": 1, "memory_gib": 8}], None),
]
FORMS = [("vfio", "hugepages"), ("stand-in", "ram")]


def _closed(schema):
    """The schema with every object that lists properties closed to them (additionalProperties: false)."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def validators():
    """{"published": validator, "closed": validator} for cloud-hypervisor's VmConfig."""
    path = os.path.join(REALDATA, "cloud-hypervisor", "cloud-hypervisor.yaml")
    with open(path) as handle:
        spec = yaml.safe_load(handle)
    out = {}
    for name, components in (("published", spec["components"]), ("closed", _closed(spec["components"]))):
        # local $refs (#/components/schemas/...) resolve against the root document
        schema = {"$ref": "#/components/schemas/VmConfig", "components": components}
        out[name] = openapi_schema_validator.OAS30Validator(
            schema, format_checker=openapi_schema_validator.oas30_format_checker)
    return out


def errors(validator, config):
    return sorted("%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message)
                  for e in validator.iter_errors(config))


@pytest.mark.parametrize("tree,requests,options", CASES, ids=[",".join(str(r["gpus"]) for r in c[1]) + "@" + c[0] for c in CASES])
def test_every_vm_config_is_valid(validators, plans, tree, requests, options):
    for plan in plans(tree, requests, options):
        for devices, memory in FORMS:
            config = vm_config(plan, devices=devices, memory=memory, kernel="/boot/vmlinuz", cmdline="console=ttyS0")
            for name in ("published", "closed"):
                assert errors(validators[name], config) == [], (plan["name"], devices, memory, name)


@pytest.mark.parametrize("mutate,expect", [
    (lambda c: c["cpus"].update(boot_vcpus="8"), "cpus/boot_vcpus: '8' is not of type 'integer'"),
    (lambda c: c["cpus"].update(boot_vcpus=0), "cpus/boot_vcpus: 0 is less than the minimum of 1"),
    (lambda c: c.pop("payload"), "(root): 'payload' is a required property"),
    (lambda c: c["memory"]["zones"][0].pop("size"), "memory/zones/0: 'size' is a required property"),
    (lambda c: c["numa"][0].update(guest_numa_id=None), "numa/0/guest_numa_id: None is not of type 'integer'"),
    (lambda c: c["cpus"]["affinity"][0].update(host_cpus="0"), "cpus/affinity/0/host_cpus: '0' is not of type 'array'"),
], ids=["vcpus-as-text", "zero-vcpus", "no-payload", "zone-without-size", "numa-id-null", "affinity-not-a-list"])
def test_a_broken_vm_config_is_rejected(validators, plans, mutate, expect):
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    config = vm_config(plan, kernel="/boot/vmlinuz")
    mutate(config)
    assert expect in errors(validators["published"], config)


def test_a_misspelled_key_passes_the_published_schema_not_the_closed_one(validators, plans):
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    config = vm_config(plan, kernel="/boot/vmlinuz")
    config["memory"]["zones"][0]["host_numa_nod"] = config["memory"]["zones"][0].pop("host_numa_node")
    assert errors(validators["published"], config) == []
    assert any("host_numa_nod" in e for e in errors(validators["closed"], config))


# --- the CLI form against the plan -------------------------------------------------------------

def split_option(text):
    """cloud-hypervisor's option syntax: key=value pairs split at commas outside [brackets]."""
    parts, depth, cur = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        assert depth >= 0, "unbalanced ] in %r" % text
        if char == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += char
    assert depth == 0, "unbalanced [ in %r" % text
    pairs = [p.split("=", 1) for p in parts + [cur]]
    assert all(len(p) == 2 for p in pairs), text
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "a key twice in %r" % text
    return dict(pairs)


def cpus_of(text):
    """``0-2,5`` or ``[0-2,5]`` -> [0, 1, 2, 5]."""
    out = []
    for part in filter(None, text.strip("[]").split(",")):
        first, _, last = part.partition("-")
        out.extend(range(int(first), int(last or first) + 1))
    return out


def options(args, flag):
    return [split_option(args[i + 1]) for i, arg in enumerate(args) if arg == flag]


def cli_differences(plan, args):
    """What the cloud-hypervisor arguments state differently from the plan; [] when they agree."""
    out = []
    (cpus,) = options(args, "--cpus")
    topo = plan["topology"]
    if cpus["boot"] != str(len(plan["vcpus"])):
        out.append("boot vCPUs %s, plan %d" % (cpus["boot"], len(plan["vcpus"])))
    if cpus["topology"] != "%d:%d:1:%d" % (topo["threads_per_core"], topo["cores_per_package"], topo["packages"]):
        out.append("topology %s, plan %s" % (cpus["topology"], topo))
    pins = {int(v): cpus_of(h) for v, h in re.findall(r"(\d+)@(\[[^\]]*\])", cpus["affinity"])}
    if pins != {v["vcpu"]: [v["host_cpu"]] for v in plan["vcpus"]}:
        out.append("affinity %s differs from the plan's vCPU pins" % cpus["affinity"])
    zones = {z["id"]: z for z in options(args, "--memory-zone")}
    for zone in plan["memory_zones"]:
        got = zones.get(zone["id"], {})
        if (got.get("size"), got.get("host_numa_node")) != ("%dM" % zone["size_mib"], str(zone["host_node"])):
            out.append("zone %s: %s, plan %d MiB on host node %d" % (zone["id"], got, zone["size_mib"], zone["host_node"]))
    return out + _numa_differences(plan, args) + _device_differences(plan, args)


def _numa_differences(plan, args):
    out = []
    numa = {int(n["guest_numa_id"]): n for n in options(args, "--numa")}
    if sorted(numa) != [n["id"] for n in plan["guest"]["numa"]]:
        out.append("guest nodes %s, plan %s" % (sorted(numa), [n["id"] for n in plan["guest"]["numa"]]))
    for node in plan["guest"]["numa"]:
        got = numa.get(node["id"], {})
        zones = [z["id"] for z in plan["memory_zones"] if z["guest_node"] == node["id"]]
        if cpus_of(got.get("cpus", "")) != node["cpus"] or got.get("memory_zones", "[]").strip("[]").split(",") != zones:
            out.append("guest node %d: %s, plan cpus %s zones %s" % (node["id"], got, node["cpus"], zones))
    return out


def _device_differences(plan, args):
    out = []
    numa = {int(n["guest_numa_id"]): n for n in options(args, "--numa")}
    devices = {d["path"].rstrip("/").split("/")[-1]: d for d in options(args, "--device")}
    if sorted(devices) != sorted(d["host_pci"] for d in plan["devices"]):
        out.append("devices %s, plan %s" % (sorted(devices), sorted(d["host_pci"] for d in plan["devices"])))
    for dev in plan["devices"]:
        got = devices.get(dev["host_pci"], {})
        segments = numa.get(dev["guest_node"], {}).get("pci_segments", "[]").strip("[]").split(",")
        if got.get("pci_segment") != str(dev["segment"]) or got.get("pci_segment") not in segments:
            out.append("%s %s: segment %s (node %d has %s), plan segment %d"
                       % (dev["kind"], dev["host_pci"], got.get("pci_segment"), dev["guest_node"], segments, dev["segment"]))
    pairs = {}
    for dev in plan["devices"]:
        pairs.setdefault(dev["pair"], set()).add(devices.get(dev["host_pci"], {}).get("pci_segment"))
    out += ["pair %d spread over segments %s" % (p, sorted(map(str, s))) for p, s in pairs.items() if len(s) != 1]
    return out


@pytest.mark.parametrize("tree,requests,options", CASES, ids=[",".join(str(r["gpus"]) for r in c[1]) + "@" + c[0] for c in CASES])
def test_cli_states_the_plan(plans, tree, requests, options):
    for plan in plans(tree, requests, options):
        assert cli_differences(plan, cli_args(plan)) == [], plan["name"]


def test_reference_cli_by_hand(plans):
    """Written from the reference node, not from the code: the 8-GPU guest's vCPU 0 and 1 are host
    CPUs 0 and 104 (one core), GPU 0000:18:00.0 and mlx5_0 (0000:19:00.0, PIX) share a segment."""
    (plan,) = plans("hgx-h100-ref", [{"name": "all", "gpus": 8}])
    args = cli_args(plan)
    (cpus,) = options(args, "--cpus")
    assert cpus["affinity"].startswith("[0@[0],1@[104],")
    devices = {d["path"]: d for d in options(args, "--device")}
    gpu, nic = devices["/sys/bus/pci/devices/0000:18:00.0/"], devices["/sys/bus/pci/devices/0000:19:00.0/"]
    assert gpu["pci_segment"] == nic["pci_segment"]
    assert len(options(args, "--numa")) == 8 and len(options(args, "--memory-zone")) == 8


def test_cli_differences_bite(plans):
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    args = cli_args(plan)
    wrong = copy.deepcopy(plan)
    wrong["vcpus"][1]["host_cpu"] = 5
    wrong["memory_zones"][0]["host_node"] = 3
    wrong["guest"]["numa"][1]["cpus"] = [2]
    wrong["devices"][1]["segment"] = 2
    found = cli_differences(wrong, args)
    for start in ("affinity", "zone mem0", "guest node 1", "nic 0000:19:00.0"):
        assert any(f.startswith(start) for f in found), (start, found)
