"""Profile validation: typos and wrong types are errors naming the key; shipped profiles are valid."""
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.profile import ProfileError, size_kb, validate

PROFILES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "inventories", "profiles")


@pytest.mark.parametrize("name", ["hgx-h100", "hgx-h200"])
def test_shipped_profiles_validate_as_they_are(name):
    with open(os.path.join(PROFILES, name + ".yml")) as handle:
        raw = yaml.safe_load(handle)
    profile = validate(raw, gate.CHECK_IDS)
    assert profile["name"] == name
    assert profile["memory"]["hugepages"] == {"1048576": 128}
    assert set(profile["require"]) <= set(gate.CHECK_IDS)
    assert profile["probes"]["nccl"]["enabled"] is False     # active probes off by default


@pytest.mark.parametrize("profile,message", [
    ({"kernel": {"cmdlne": {}}}, "profile key kernel.cmdlne: unknown (known: cmdline, grub_sources, packages, release, version)"),
    ({"memroy": {}}, "profile key memroy: unknown"),
    ({"os": {"version_id": 22.1}}, "profile key os.version_id: must be a string, got float 22.1 (quote it"),
    ({"gpu": {"count": "8"}}, "profile key gpu.count: must be an integer, got str '8'"),
    ({"gpu": {"count": True}}, "profile key gpu.count: must be an integer, got bool"),
    ({"cpu": {"smt": "yes"}}, "profile key cpu.smt: must be true or false"),
    ({"memory": {"thp": "off"}}, "profile key memory.thp: 'off' is not one of always, madvise, never"),
    ({"memory": {"hugepages": {"1X": 4}}}, "profile key memory.hugepages.1X: not a hugepage size"),
    ({"memory": {"hugepages": {"1G": 4, "1048576": 2}}}, "size given twice"),
    ({"nic": {"affinity": ["PIX", "FOO"]}}, "profile key nic.affinity[1]: 'FOO' is not one of"),
    ({"storage": {"mounts": [{"fstype": "ext4"}]}}, "profile key storage.mounts[0].path: required"),
    ({"storage": {"mounts": [{"path": "/raid", "min_free": 1}]}}, "profile key storage.mounts[0].min_free: unknown"),
    ({"require": ["kernel.cmdlin"]}, "profile key require[0]: unknown check id 'kernel.cmdlin'"),
    ({"kernel": {"cmdline": {"required": ["iommu=pt intel_iommu=on"]}}}, "kernel.cmdline.required[0]: one parameter per item"),
    ([], "profile: must be a mapping, got list"),
])
def test_bad_profile_names_the_key_and_the_cause(profile, message):
    with pytest.raises(ProfileError) as exc:
        validate(profile, gate.CHECK_IDS)
    assert message in str(exc.value)


def test_normalised_profile_has_every_key_and_converts_sizes():
    profile = validate({"memory": {"hugepages": {"2M": 1024, "1048576": 4}}, "ib": {"min_rate_gbps": 400}})
    assert profile["memory"]["hugepages"] == {"2048": 1024, "1048576": 4}
    assert profile["ib"]["min_rate_gbps"] == 400.0 and isinstance(profile["ib"]["min_rate_gbps"], float)
    assert profile["kernel"] is None and profile["nic"] is None


@pytest.mark.parametrize("text,kb", [("1G", "1048576"), ("2M", "2048"), ("2048", "2048"), ("1GB", "1048576"), ("64k", "64")])
def test_size_kb(text, kb):
    assert size_kb(text) == kb
