"""The collection's vendor profiles (plugins/module_utils/_bios.py) against the lab BMC flavours
(lab/bmc/flavours/*.yml), which were written independently: every portable value the collection
would write must be an allowed value of the same attribute on the BMC and read back as the same
portable value."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils import _bios

model = pytest.importorskip("lab.bmc.model", reason="lab/bmc (pyyaml) not importable")

CASES = [(vendor, key) for vendor in sorted(_bios.PROFILES) for key in _bios.PROFILES[vendor]["settings"]]


@pytest.mark.parametrize("vendor,key", CASES)
def test_profile_matches_bmc_flavour(vendor, key):
    flavour = model.load_flavour(vendor)
    name, values = _bios.PROFILES[vendor]["settings"][key]
    assert name in flavour["attributes"], "%s: %s maps to %s, unknown to the BMC" % (vendor, key, name)
    allowed = flavour["attributes"][name]["values"]
    for portable, raw in values.items():
        assert raw in allowed, "%s %s=%s -> %s=%r not allowed by the BMC (%s)" % (vendor, key, portable, name, raw, allowed)
        if key in model.PORTABLE:
            derived = model.derive_settings(flavour, dict(model.defaults(flavour), **{name: raw}))[key]
            assert derived == portable, "%s: %s=%r reads back as %s=%r" % (vendor, name, raw, key, derived)


@pytest.mark.parametrize("vendor", sorted(_bios.PROFILES))
def test_flavour_switches_without_profile_are_fixed(vendor):
    """A portable setting the BMC has a switch for must be in the collection profile too."""
    flavour = model.load_flavour(vendor)
    for key in model.PORTABLE:
        if "fixed" not in flavour["settings"][key]:
            assert key in _bios.PROFILES[vendor]["settings"], "%s: BMC has %s, profile does not" % (vendor, key)


def test_dell_locks_are_known_dependencies():
    flavour = model.load_flavour("dell")
    for name, lock in flavour["locks"].items():
        assert _bios.PROFILES["dell"]["requires"][name] == (lock["attribute"], lock["value"])
