"""The collection's resolver (plugins/module_utils/_bmc/bios_resolve.py) against the lab BMC flavours
(lab/bmc/flavours/*.yml, rebuilt from the real captures): every portable value a flavour's host can
show must resolve, on the flavour's own registry document, to that flavour's attribute and to a raw
value that reads back as the same portable value. The flavours' maps are written by hand in
lab/bmc/build_flavours.py; the resolver works from registry metadata."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios as _bios

from lab.bmc import model

CASES = []
for _vendor in model.FLAVOURS:
    _flavour = model.load_flavour(_vendor)
    for _key, _spec in sorted(_flavour["settings"].items()):
        if "fixed" not in _spec:
            for _portable in sorted(set(map(str, _spec["map"].values()))):
                CASES.append((_vendor, _key, _portable))


def portable_value(key, text):
    return {"True": True, "False": False}.get(text, text)


@pytest.mark.parametrize("vendor,key,portable", CASES)
def test_flavour_setting_resolves_on_its_registry(vendor, key, portable):
    flavour = model.load_flavour(vendor)
    registry = _bios.parse_registry(model.registry_document(flavour))
    wanted = portable_value(key, portable)
    for detected in (vendor, None):   # with the vendor's hints, and as an unknown vendor would
        res = _bios.resolve_lib.resolve(key, wanted, registry, detected)
        if detected is None and res["problem"] and res["problem"].startswith("ambiguous"):
            continue
        assert res["problem"] is None, (vendor, key, portable, detected, res)
        assert res["attribute"] == flavour["settings"][key]["attribute"], (vendor, key, res)
        derived = model.derive_settings(flavour, dict(model.defaults(flavour), **{res["attribute"]: res["value"]}))[key]
        assert derived == wanted, "%s: %s=%r reads back as %s=%r" % (vendor, res["attribute"], res["value"], key, derived)


@pytest.mark.parametrize("vendor", model.FLAVOURS)
def test_fixed_settings_have_no_attribute_on_the_bmc(vendor):
    """A setting the flavour's BMC has no switch for must not resolve there either."""
    flavour = model.load_flavour(vendor)
    registry = _bios.parse_registry(model.registry_document(flavour))
    for key, spec in flavour["settings"].items():
        if "fixed" in spec:
            assert _bios.resolve_lib.resolve(key, spec["fixed"], registry, vendor)["problem"], (vendor, key)


def test_dell_locks_are_registry_dependencies_the_module_releases():
    flavour = model.load_flavour("dell")
    doc = model.registry_document(flavour)
    registry, deps = _bios.parse_registry(doc), _bios.registry_lib.parse_dependencies(doc)
    current = model.defaults(flavour)
    desired, reasons = _bios.add_dependencies("dell", {"ProcCStates": "Enabled", "ProcC1E": "Enabled"}, registry, deps, current, {})
    assert list(desired)[0] == "SysProfile" and desired["SysProfile"] == "Custom" and "SysProfile" in reasons
    _bios.validate("lab", desired, registry, current, deps)
