"""Hostile input for the washing machine's contract filters: desired, desired_digest, converged_lines,
reboot_requests, firmware_due. Wrong types, garbage reports and missing keys end in
AnsibleFilterError naming the input, never TypeError/KeyError/AttributeError."""
import datetime
import glob
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import converged_lines as _lines
from ansible_collections.gpufleet.provision.plugins.filter import desired as _desired
from ansible_collections.gpufleet.provision.plugins.filter import desired_digest as _digest
from ansible_collections.gpufleet.provision.plugins.filter import firmware as _firmware
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile

COVERS = ["filter:desired", "filter:desired_digest", "filter:converged_lines", "filter:reboot_requests", "filter:firmware_due"]

FILTERS = {}
for _module in (_lines, _desired, _digest, _firmware):
    FILTERS.update(_module.FilterModule().filters())

PROFILES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "inventories", "profiles")


def _refused(name, *args, **kwargs):
    """The filter's AnsibleFilterError message (lower case); any other exception fails the test."""
    names = kwargs.pop("names", ())
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS[name](*args, **kwargs)
    msg = str(info.value).lower()
    for word in names:
        assert str(word).lower() in msg, "message does not name %r: %s" % (word, info.value)
    return msg


# ---- desired ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile, area, names", [
    (None, "kernel_cmdline", ["kernel_cmdline", "profile mapping"]),
    (["hgx-h100"], "thp", ["thp", "profile mapping"]),
    ("hgx-h100", "thp", ["thp", "profile mapping"]),
    ({"name": "x"}, ["thp"], ["area", "['thp']"]),
    ({"name": "x"}, None, ["area", "none"]),
    ({"name": "x"}, "no_such_area", ["no_such_area", "unknown"]),
    ({"name": 5}, "thp", ["thp", "name"]),
    ({"name": "x", "memory": 5}, "hugepages", ["hugepages", "memory"]),
    ({"name": "x", "memory": {"hugepages": "abc"}}, "hugepages", ["hugepages", "memory.hugepages"]),
    ({"name": "x", "kernel": {"cmdline": {"required": 5}}}, "kernel_cmdline", ["kernel_cmdline", "kernel.cmdline.required"]),
    ({"name": "x", "no_such_key": 1}, "thp", ["thp", "no_such_key"]),
])
def test_desired_wrong_types_and_garbage_profiles(profile, area, names):
    _refused("desired", profile, area, names=names)


@pytest.mark.parametrize("area, context", [("bios_settings", {"x": 1}), ("nvidia_driver", {"os_family": 5})])
def test_desired_context_that_does_not_fit_the_area(area, context):
    with open(os.path.join(PROFILES, "hgx-h100.yml")) as handle:
        profile = _profile.validate(yaml.safe_load(handle))
    _refused("desired", profile, area, names=[area, list(context)[0]], **context)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(PROFILES, "*.yml"))))
def test_desired_of_a_shipped_profile_as_the_lookup_gives_it(path):
    with open(path) as handle:
        profile = _profile.validate(yaml.safe_load(handle))
    assert _profile.validate(profile) == profile        # validated twice: the same profile, so the filter may
    assert FILTERS["desired"](profile, "thp") == profile["memory"]["thp"] if profile.get("memory") else True


# ---- desired_digest -------------------------------------------------------------------------------

@pytest.mark.parametrize("profile, role_vars, names", [
    (None, None, ["profile mapping"]),
    ([], None, ["profile mapping"]),
    ({"name": "x"}, ["a"], ["role_vars"]),
    ({"name": "x"}, "abc", ["role_vars"]),
    ({1: "a", "b": 2}, None, ["cannot be serialised"]),
    ({"name": object()}, None, ["cannot be serialised", "object"]),
])
def test_desired_digest_wrong_types(profile, role_vars, names):
    _refused("desired_digest", profile, role_vars, names=names)


def test_desired_digest_of_yaml_dates_and_sets_is_stable():
    one = FILTERS["desired_digest"]({"name": "x", "when": datetime.date(2026, 1, 2)}, {"tags": {"b", "a", "c"}})
    two = FILTERS["desired_digest"]({"name": "x", "when": datetime.date(2026, 1, 2)}, {"tags": {"c", "a", "b"}})
    assert one == two and one.startswith("sha256:")


def test_desired_digest_deep_nesting():
    deep = []
    for dummy in range(100000):
        deep = [deep]
    _refused("desired_digest", {"name": "x", "deep": deep}, names=["cannot be serialised"])


# ---- converged_lines ------------------------------------------------------------------------------

@pytest.mark.parametrize("results, hosts, names", [
    (None, None, ["one result per host"]),
    ({"converged": True}, ["h1"], ["one result per host"]),
    ([{}], "h1", ["one result per host"]),
    ([{}, {}], ["h1"], ["one result per host"]),
    ([{"converged": True}], [None], ["host names", "none"]),
    ([{"converged": True}], [5], ["host names", "5"]),
    ([{"converged": True}, {"converged": True}], ["h1", ["x"]], ["host names", "['x']"]),
    ([{"converged_reasons": 5}], ["h1"], ["converged_reasons", "h1"]),
    ([{"converged_reasons": "abc"}], ["h1"], ["converged_reasons", "h1"]),
    ([{"converged_reasons": [1, None]}], ["h1"], ["converged_reasons", "h1"]),
    ([{"skip_reason": 5}], ["h1"], ["skip_reason", "h1"]),
    (["garbage"], ["h1"], ["h1", "garbage"]),
    ([5], ["h1"], ["h1", "5"]),
])
def test_converged_lines_garbage_results(results, hosts, names):
    _refused("converged_lines", results, hosts, names=names)


def test_converged_lines_only_true_means_converged():
    # a string "false" is truthy: it must never skip the washing machine
    assert FILTERS["converged_lines"]([{"converged": "false"}, None], ["h1", "h2"]) == [
        "wash: h1: not asked", "wash: h2: not asked"]


# ---- reboot_requests (docs/roles.md section 3: reasons -> {role, reason} records) -------------------

@pytest.mark.parametrize("reasons, role, names", [
    (None, "kernel", ["kernel", "list of reasons"]),
    ("one string", "kernel", ["kernel", "list of reasons"]),
    ({"a": 1}, "kernel", ["kernel", "list of reasons"]),
    (5, "kernel", ["kernel", "list of reasons"]),
    (["GRUB will boot x"], None, ["role", "none"]),
    (["GRUB will boot x"], "", ["role"]),
    (["GRUB will boot x"], ["kernel"], ["role", "['kernel']"]),
    ([None], "kernel", ["kernel", "reason [0]"]),
    (["ok", {"x": 1}], "kernel", ["kernel", "reason [1]"]),
    (["ok", ""], "kernel", ["kernel", "reason [1]"]),
    ([["nested"]], "kernel", ["kernel", "reason [0]"]),
])
def test_reboot_requests_wrong_types(reasons, role, names):
    _refused("reboot_requests", reasons, role, names=names)


def test_reboot_requests_records_as_the_contract_says():
    assert FILTERS["reboot_requests"](("BIOS pending",), "bios") == [{"role": "bios", "reason": "BIOS pending"}]
    assert FILTERS["reboot_requests"]([], "kernel") == []


# ---- firmware_due ---------------------------------------------------------------------------------

_NIC = {"name": "mlx5_0", "hca_type": "MT4129", "fw_ver": "28.39.1002"}


@pytest.mark.parametrize("args, names", [
    ((None, {}, {}), ["node facts"]),
    (([_NIC], {}, {}), ["node facts"]),
    (({"nics": "abc"}, {"MT4129": "28.40.1000"}, {}), ["nics", "abc"]),
    (({"nics": [None]}, {"MT4129": "28.40.1000"}, {}), ["nics[0]"]),
    (({"nics": [dict(_NIC, fw_ver=5)]}, {"MT4129": "28.40.1000"}, {}), ["nics[0].fw_ver", "5"]),
    (({"nics": [dict(_NIC, hca_type=["MT"])]}, {"MT4129": "28.40.1000"}, {}), ["nics[0].hca_type"]),
    (({"nvme": {"a": 1}}, {}, {"SAMSUNG": "1"}), ["nvme"]),
    (({"nvme": [{"model": 5}]}, {}, {"SAMSUNG": "1"}), ["nvme[0].model"]),
    (({"nics": [_NIC]}, ["MT4129"], {}), ["nic_minimums"]),
    (({"nics": [_NIC]}, "abc", {}), ["nic_minimums", "abc"]),
    (({"nics": [_NIC]}, {5: "28.40.1000"}, {}), ["nic_minimums", "5"]),
    (({"nics": [_NIC]}, {"MT4129": None}, {}), ["nic_minimums", "mt4129"]),
    (({"nics": [_NIC]}, {"MT4129": ["28"]}, {}), ["nic_minimums", "mt4129"]),
    (({"nics": [_NIC]}, {}, 5), ["nvme_minimums", "5"]),
    (({"nics": [_NIC]}, {"MT4129": "28.40.1000"}, {}, "maybe"), ["allow_downgrade", "maybe"]),
    (({"nics": [_NIC]}, {"MT4129": "28.40.1000"}, {}, True, "abc"), ["images", "abc"]),
    (({"nics": [_NIC]}, {"MT4129": "28.40.1000"}, {}, True, [None]), ["images"]),
    (({"nics": [_NIC]}, {"MT4129": "28.40.1000"}, {}, True, [{"type": ["nic"]}]), ["images"]),
])
def test_firmware_due_wrong_types(args, names):
    _refused("firmware_due", *args, names=names)


def test_firmware_due_a_version_yaml_read_as_a_number():
    # nvme minimum 1.2 unquoted in YAML is a float: taken as its text, compared as a version
    got = FILTERS["firmware_due"]({"nvme": [{"name": "nvme0", "model": "SAMSUNG X", "firmware": "1.1"}]}, None, {"SAMSUNG": 1.2})
    assert got["reasons"] == ["nvme0 1.1 below the minimum 1.2"]
    got = FILTERS["firmware_due"]({"nics": [_NIC]}, {"MT4129": "28.39.1002"}, {}, "no", None)
    assert got["nic"] == [] and got["at_minimum"] == ["mlx5_0 at 28.39.1002 (minimum 28.39.1002)"]
