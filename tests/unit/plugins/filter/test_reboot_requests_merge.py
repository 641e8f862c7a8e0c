"""reboot_requests_merge: a role's reasons replace its own records in gpufleet_reboot_requests
(docs/roles.md section 3); expectations by hand."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter.reboot_requests_merge import FilterModule

merge = FilterModule().filters()["reboot_requests_merge"]

BIOS = {"role": "bios", "reason": "BIOS settings pending at the BMC: SncEn"}
OLD_PCIE = {"role": "pcie", "reason": "ATS_ENABLED Next Boot 1, Current 0 on 0000:18:00.0"}


def test_first_request_of_the_run():
    assert merge([], "kernel", ["GRUB will boot 6.8.0-45-generic, running 6.8.0-31-generic"]) == [
        {"role": "kernel", "reason": "GRUB will boot 6.8.0-45-generic, running 6.8.0-31-generic"}]


def test_a_role_run_twice_asks_once():
    once = merge([BIOS], "pcie", [OLD_PCIE["reason"]])
    assert merge(once, "pcie", [OLD_PCIE["reason"]]) == [BIOS, OLD_PCIE] == once


def test_the_role_records_are_replaced_and_the_others_kept_in_order():
    requests = [OLD_PCIE, BIOS, {"role": "pcie", "reason": "stale second"}]
    assert merge(requests, "pcie", ["ATS_ENABLED Next Boot 1, Current 0 on 0000:2a:00.0"]) == [
        BIOS, {"role": "pcie", "reason": "ATS_ENABLED Next Boot 1, Current 0 on 0000:2a:00.0"}]


def test_no_reasons_removes_the_role_requests():
    assert merge([OLD_PCIE, BIOS], "pcie", []) == [BIOS]


def test_repeated_reasons_count_once_and_null_requests_are_none():
    assert merge(None, "firmware", ["a", "b", "a"]) == [
        {"role": "firmware", "reason": "a"}, {"role": "firmware", "reason": "b"}]


def test_the_input_is_not_changed():
    requests = [OLD_PCIE, BIOS]
    merge(requests, "pcie", ["new"])
    assert requests == [OLD_PCIE, BIOS]


@pytest.mark.parametrize("requests, role, reasons, names", [
    ("kernel: reboot", "kernel", ["x"], "list of {role, reason}"),
    ({"role": "kernel", "reason": "x"}, "kernel", ["x"], "list of {role, reason}"),
    ([{"role": "kernel"}], "ofed", ["x"], "{role: text, reason: text}"),
    (["kernel"], "ofed", ["x"], "{role: text, reason: text}"),
    ([], "", ["x"], "non-empty name"),
    ([], None, ["x"], "non-empty name"),
    ([], "ofed", "mlx5_core 24.04 installed, 23.10 loaded", "list of texts"),
    ([], "ofed", None, "list of texts"),
    ([], "ofed", ["ok", ""], "non-empty text"),
    ([], "ofed", [{"reason": "x"}], "non-empty text"),
])
def test_bad_input_fails_naming_the_role_and_the_value(requests, role, reasons, names):
    with pytest.raises(AnsibleFilterError) as err:
        merge(requests, role, reasons)
    assert names in str(err.value) and "reboot_requests_merge(%r)" % role in str(err.value)
