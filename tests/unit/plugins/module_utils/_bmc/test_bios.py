"""Pure BIOS logic: classify/plan/verify on every current x pending x desired combination,
registry validation (locks from Dependencies, ValueDisplayName), Dell dependencies."""
import itertools
import re

import pytest
from hypothesis import given, strategies as st

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios as _bios

MISSING = "<missing>"
VALUES = (MISSING, "A", "B")


def _case(cur, pen):
    current = {} if cur is MISSING else {"X": cur}
    pending = {} if pen is MISSING else {"X": pen}
    return current, pending


def expected(cur, pen, want):
    # The rule, written out per case rather than derived from the code under test.
    if pen is MISSING:
        return "current" if cur == want else "write"
    if pen == want:
        return "current" if cur == want else "pending"
    return "write"  # a pending value other than desired would win at the reset


@pytest.mark.parametrize("cur,pen", list(itertools.product(VALUES, VALUES)))
def test_classify_every_combination(cur, pen):
    current, pending = _case(cur, pen)
    status = _bios.classify({"X": "A"}, current, pending)["X"]
    assert status == expected(cur, pen, "A")
    p = _bios.plan({"X": "A"}, current, pending)
    assert (p["to_write"] == {"X": "A"}) == (status == "write")
    assert (p["already_pending"] == ["X"]) == (status == "pending")
    assert p["reboot_required"] == (status != "current")
    if status == "write":
        assert p["diff"] == {"before": {"X": pending.get("X", current.get("X"))}, "after": {"X": "A"}}
    else:
        assert p["diff"] == {"before": {}, "after": {}}


@pytest.mark.parametrize("cur,pen", list(itertools.product(VALUES, VALUES)))
def test_verify_every_combination(cur, pen):
    current, pending = _case(cur, pen)
    failures = _bios.verify({"X": "A"}, current, pending)
    if cur == "A":
        assert failures == []
    else:
        assert failures == [{"attribute": "X", "expected": "A", "actual": None if cur is MISSING else cur,
                             "pending": None if pen is MISSING else pen}]


@given(st.dictionaries(st.sampled_from("abcdef"), st.sampled_from("xyz"), min_size=1),
       st.dictionaries(st.sampled_from("abcdef"), st.sampled_from("xyz")),
       st.dictionaries(st.sampled_from("abcdef"), st.sampled_from("xyz")))
def test_plan_applied_then_converges(desired, current, pending):
    """After writing the plan and a reset (pending -> current), nothing is left to do."""
    p = _bios.plan(desired, current, pending)
    new_pending = dict(pending, **p["to_write"])
    rebooted = dict(current, **new_pending)
    assert _bios.plan(desired, rebooted, {})["reboot_required"] is False
    assert _bios.verify(desired, rebooted, {}) == []
    # A second run before the reset never writes again.
    assert _bios.plan(desired, current, new_pending)["to_write"] == {}


def test_merge_conflict():
    with pytest.raises(_bios.BiosError, match="LogicalProc='Disabled' conflicts"):
        _bios.merge_desired({"LogicalProc": "Disabled"}, {"LogicalProc": "Enabled"})
    assert _bios.merge_desired({"A": 1}, {"B": 2}) == {"B": 2, "A": 1}


def test_dell_dependency_first_and_conflict():
    desired, reasons = _bios.add_dependencies("dell", {"SubNumaCluster": "4WayClustering", "ProcCStates": "Disabled"})
    assert list(desired) == ["SysProfile", "SubNumaCluster", "ProcCStates"] and desired["SysProfile"] == "Custom"
    assert reasons == {"SysProfile": "required by ProcCStates"}
    with pytest.raises(_bios.BiosError, match="ProcCStates needs SysProfile=Custom"):
        _bios.add_dependencies("dell", {"ProcCStates": "Disabled", "SysProfile": "PerfOptimized"})
    assert _bios.add_dependencies("lenovo", {"Processors_SNC": "SNC4"}) == ({"Processors_SNC": "SNC4"}, {})


REGISTRY_DOC = {"RegistryEntries": {
    "Attributes": [
        {"AttributeName": "LogicalProc", "Type": "Enumeration", "ReadOnly": False,
         "Value": [{"ValueName": "Enabled", "ValueDisplayName": "Enabled"}, {"ValueName": "Disabled", "ValueDisplayName": "Disabled"}]},
        {"AttributeName": "ProcCores", "Type": "Integer", "ReadOnly": False},
        {"AttributeName": "ServiceTag", "Type": "String", "ReadOnly": True},
        {"AttributeName": "SubNumaCluster", "Type": "Enumeration", "ReadOnly": False,
         "Value": [{"ValueName": "2-Way", "ValueDisplayName": "2-Way Clustering"}, {"ValueName": "Disabled", "ValueDisplayName": "Disabled"}]},
        {"AttributeName": "SysProfile", "Type": "Enumeration", "ReadOnly": False,
         "Value": [{"ValueName": "PerfOptimized"}, {"ValueName": "Custom"}]},
        {"AttributeName": "ProcCStates", "Type": "Enumeration", "ReadOnly": True,
         "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]},
        {"AttributeName": "NodeInterleave", "Type": "Enumeration", "ReadOnly": False,
         "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]}],
    "Dependencies": [
        {"DependencyFor": "ProcCStates", "Type": "Map", "Dependency": {
            "MapFrom": [{"MapFromAttribute": "SysProfile", "MapFromCondition": "NEQ", "MapFromProperty": "CurrentValue",
                         "MapFromValue": "Custom"}],
            "MapToAttribute": "ProcCStates", "MapToProperty": "ReadOnly", "MapToValue": True}},
        {"DependencyFor": "SubNumaCluster", "Type": "Map", "Dependency": {
            "MapFrom": [{"MapFromAttribute": "NodeInterleave", "MapFromCondition": "EQU", "MapFromProperty": "CurrentValue",
                         "MapFromValue": "Enabled"}],
            "MapToAttribute": "SubNumaCluster", "MapToProperty": "ReadOnly", "MapToValue": True}}]}}
REGISTRY = _bios.parse_registry(REGISTRY_DOC)
DEPS = _bios.registry_lib.parse_dependencies(REGISTRY_DOC)


def test_validate_lists_every_problem_and_closest_name():
    with pytest.raises(_bios.BiosError) as err:
        _bios.validate("https://bmc1", {"LogicalPro": "Enabled", "ProcCores": "many", "ServiceTag": "X",
                                        "LogicalProc": "On"}, REGISTRY, {})
    msg = str(err.value)
    assert msg.startswith("BMC https://bmc1: nothing written")
    assert "LogicalPro is not in the BIOS attribute registry (closest: LogicalProc" in msg
    assert "LogicalProc: value 'On' not allowed (allowed: Enabled, Disabled)" in msg
    assert "ProcCores: value 'many' is not an integer" in msg and "ServiceTag is read-only" in msg


def test_validate_without_registry_uses_current_names():
    _bios.validate("b", {"A": "anything"}, {}, {"A": "x"})
    with pytest.raises(_bios.BiosError, match="B is not in the current BIOS attributes"):
        _bios.validate("b", {"B": 1}, {}, {"A": "x"})


def test_coerce_follows_registry_types_and_display_names():
    assert _bios.coerce({"ProcCores": "8", "LogicalProc": "Enabled", "SubNumaCluster": "2-Way Clustering"}, REGISTRY) == {
        "ProcCores": 8, "LogicalProc": "Enabled", "SubNumaCluster": "2-Way"}


def test_read_only_unlocked_by_its_dependency():
    current = {"SysProfile": "PerfOptimized", "ProcCStates": "Disabled", "NodeInterleave": "Disabled"}
    with pytest.raises(_bios.BiosError, match="ProcCStates is read-only while SysProfile is not Custom"):
        _bios.validate("b", {"ProcCStates": "Enabled"}, REGISTRY, current, DEPS)
    # the same PATCH sets SysProfile=Custom first: the registry's ReadOnly is a state, not a fact
    desired, reasons = _bios.add_dependencies("dell", {"ProcCStates": "Enabled"}, REGISTRY, DEPS, current, {})
    assert list(desired) == ["SysProfile", "ProcCStates"] and desired["SysProfile"] == "Custom"
    assert "unlocks ProcCStates" in reasons["SysProfile"]
    _bios.validate("b", desired, REGISTRY, current, DEPS)
    # a pending SysProfile=Custom unlocks it too
    _bios.validate("b", {"ProcCStates": "Enabled"}, REGISTRY, current, DEPS, {"SysProfile": "Custom"})
    with pytest.raises(_bios.BiosError, match="needs SysProfile=Custom"):
        _bios.add_dependencies("dell", {"ProcCStates": "Enabled", "SysProfile": "PerfOptimized"}, REGISTRY, DEPS, current, {})


def test_equality_lock_is_named_not_released():
    current = {"NodeInterleave": "Enabled", "SubNumaCluster": "Disabled"}
    desired, reasons = _bios.add_dependencies(None, {"SubNumaCluster": "2-Way"}, REGISTRY, DEPS, current, {})
    assert desired == {"SubNumaCluster": "2-Way"} and reasons == {}
    with pytest.raises(_bios.BiosError, match="SubNumaCluster is read-only while NodeInterleave is Enabled"):
        _bios.validate("b", desired, REGISTRY, current, DEPS)
    _bios.validate("b", {"SubNumaCluster": "2-Way", "NodeInterleave": "Disabled"}, REGISTRY, current, DEPS)


def test_full_settings_object_is_pending_only_where_it_differs():
    current = {"A": "x", "B": "y"}
    assert _bios.pending_changes(current, {"A": "x", "B": "y"}) == {}
    assert _bios.pending_changes(current, {"A": "x", "B": "z", "C": 1}) == {"B": "z", "C": 1}
    assert _bios.pending_changes(current, {}) == {}


@pytest.mark.parametrize("manufacturer,vendor", [
    ("Dell Inc.", "dell"), ("Lenovo", "lenovo"), ("HPE", "hpe"), ("Hewlett Packard Enterprise", "hpe"),
    ("Supermicro", "supermicro"), ("NVIDIA", "ami"), ("American Megatrends International", "ami"),
    ("Contoso", None), ("", None), (None, None), ("Dynamic Systems", None)])
def test_detect_vendor(manufacturer, vendor):
    assert _bios.detect_vendor(manufacturer) == vendor


def test_format_failures_names_each_attribute():
    msg = _bios.format_failures("https://b", [{"attribute": "SNC", "expected": "SNC4", "actual": "Disabled", "pending": "SNC4"}],
                                "job stuck")
    assert msg == "BMC https://b: BIOS not as desired after reboot: SNC: expected 'SNC4', actual 'Disabled' (still pending: 'SNC4'). job stuck"


def test_bmc_reporting_display_names_compares_value_names():
    """Some BMCs put ValueDisplayNames in Attributes: "2-Way Clustering" is the current 2-Way."""
    current = _bios.registry_lib.normalize_values({"SubNumaCluster": "2-Way Clustering", "ProcCores": 8}, REGISTRY)
    assert current == {"SubNumaCluster": "2-Way", "ProcCores": 8}
    assert _bios.plan({"SubNumaCluster": "2-Way"}, current, {})["to_write"] == {}


@pytest.mark.parametrize("attributes,settings,said", [
    ({"A": None}, None, "attributes.A is an empty body (or null)"), ({"A": [1]}, None, "attributes.A is a list"),
    ({"A": float("nan")}, None, "attributes.A is a number"), ({"": 1}, None, "attribute name '' is empty"),
    ({}, {"snc": None}, "nothing to do"), (None, None, "nothing to do"),
])
def test_check_input_refuses_garbage_before_any_request(attributes, settings, said):
    with pytest.raises(_bios.BiosError, match=re.escape(said)):
        _bios.check_input(attributes, settings)


def test_check_input_accepts_scalars_and_settings():
    _bios.check_input({"A": "x", "B": 3, "C": True, "D": 1.5}, None)
    _bios.check_input({}, {"snc": "snc4", "vtd": None})


def test_registry_shape_problem_names_the_place():
    from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_registry
    good = {"RegistryEntries": {"Attributes": [{"AttributeName": "A", "Type": "Enumeration", "Value": [{"ValueName": "x"}]}],
                                "Dependencies": [{"Dependency": {"MapFrom": [{"MapFromAttribute": "A"}], "MapToAttribute": "B"}}]}}
    assert bios_registry.shape_problem(good) is None
    bad = {"RegistryEntries": {"Attributes": [{"AttributeName": "A", "UpperBound": "9"}]}}
    assert bios_registry.shape_problem(bad) == "RegistryEntries.Attributes[0] (A).UpperBound is a string ('9'); expected a number"
    assert bios_registry.shape_problem({"RegistryEntries": {"Attributes": [True]}}) == \
        "RegistryEntries.Attributes[0] is a boolean (true); expected an object"
