"""Firmware order, minimum matching, the flash plan, and the nvme-cli parsers."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import firmware as fw

IMAGE = {"version": "28.40.1000", "path": "/srv/fw/cx7-28.40.1000.bin"}


def test_version_order_and_minimum_for():
    assert fw.below("28.39.1002", "28.40.1000") and not fw.below("28.40.1000", "28.40.1000")
    assert fw.below("28.9.1000", "28.39.1000")   # numeric, not text, order
    assert fw.below("MPK7525Q", "MPK7526Q")
    minimums = {"MT4129": "28.39.1002", "SAMSUNG MZWLR3T8HBLS": "MPK7525Q"}
    assert fw.minimum_for(minimums, ("MT4129", "MT_0000000838")) == ("MT4129", "28.39.1002")
    assert fw.minimum_for(minimums, ("SAMSUNG MZWLR3T8HBLS-00007",)) == ("SAMSUNG MZWLR3T8HBLS", "MPK7525Q")
    assert fw.minimum_for(minimums, ("MT4125",)) == (None, None)


def test_plan_below_minimum_flashes_and_asks_for_reboot():
    got = fw.plan("mlx5_0", "28.38.1000", None, "28.39.1002", IMAGE)
    assert got["action"] == "flash" and got["reason"] == "mlx5_0 28.38.1000 -> 28.40.1000"
    assert got["reboot_reason"] == "mlx5_0 firmware 28.40.1000 burnt, 28.38.1000 running: active at the next boot"


def test_plan_pending_burn_is_not_flashed_again_but_still_needs_the_reboot():
    got = fw.plan("mlx5_0", "28.38.1000", "28.40.1000", "28.39.1002", IMAGE)
    assert got["action"] == "none" and "active at the next boot" in got["reboot_reason"]


def test_plan_at_minimum_nothing():
    assert fw.plan("mlx5_0", "28.40.1000", "28.40.1000", "28.39.1002", IMAGE) == {
        "action": "none", "reason": "mlx5_0 at 28.40.1000 (minimum 28.39.1002)", "reboot_reason": None}


def test_plan_never_downgrades_unless_allowed():
    newer = {"version": "28.39.1002", "path": "/srv/fw/old.bin"}
    assert fw.plan("mlx5_0", "28.41.1000", None, "28.39.1002", newer)["action"] == "none"
    got = fw.plan("mlx5_0", "28.41.1000", None, "28.39.1002", newer, allow_downgrade=True)
    assert got["action"] == "flash" and got["reason"] == "mlx5_0 28.41.1000 -> 28.39.1002"


def test_plan_refusals_name_device_and_image():
    with pytest.raises(fw.FirmwareError, match="mlx5_0: firmware 28.38.1000 is below the profile minimum 28.39.1002 and firmware_images has no image"):
        fw.plan("mlx5_0", "28.38.1000", None, "28.39.1002", None)
    with pytest.raises(fw.FirmwareError, match="image /srv/fw/x.bin is version 28.38.1100, below the profile minimum 28.39.1002"):
        fw.plan("mlx5_0", "28.38.1000", None, "28.39.1002", {"version": "28.38.1100", "path": "/srv/fw/x.bin"})
    with pytest.raises(fw.FirmwareError, match="version unknown"):
        fw.plan("nvme0", None, None, "MPK7525Q", None)


def test_nvme_id_ctrl():
    text = ("NVME Identify Controller:\nvid       : 0x144d\nssvid     : 0x144d\nsn        : S64FNE0R800123\n"
            "mn        : SAMSUNG MZWLR3T8HBLS-00007\nfr        : MPK7525Q\nrab       : 2\nfrmw      : 0x16\n"
            "ps    0 : mp:25.00W operational enlat:70 exlat:70 rrt:0 rrl:0\n")
    assert fw.parse_nvme_id_ctrl(text) == {"model": "SAMSUNG MZWLR3T8HBLS-00007", "serial": "S64FNE0R800123",
                                           "firmware": "MPK7525Q", "frmw": 0x16}
    with pytest.raises(ValueError, match="no mn/fr"):
        fw.parse_nvme_id_ctrl("NVMe status: INVALID_NS")


def test_nvme_fw_log_active_and_next_slot():
    text = ("Firmware Log for device:nvme0\nafi  : 0x21\nfrs1 : 0x51353235374b504d (MPK7525Q)\n"
            "frs2 : 0x51363235374b504d (MPK7526Q)\n")
    got = fw.parse_nvme_fw_log(text)
    assert (got["active_slot"], got["next_slot"], got["active"], got["next"]) == (1, 2, "MPK7525Q", "MPK7526Q")
    # no "(text)": decoded from the little-endian hex, as older nvme-cli prints it
    got = fw.parse_nvme_fw_log("afi  : 0x1\nfrs1 : 0x51353235374b504d\n")
    assert got["active"] == "MPK7525Q" and got["next_slot"] is None and got["next"] == "MPK7525Q"
    with pytest.raises(ValueError, match="no afi line"):
        fw.parse_nvme_fw_log("NVMe status: Invalid Log Page")


FACTS = {"nics": [{"name": "mlx5_0", "hca_type": "MT4129", "board_id": "MT_0000000838", "fw_ver": "28.39.1002"},
                  {"name": "mlx5_1", "hca_type": "MT4129", "board_id": "MT_0000000838", "fw_ver": "28.38.1000"},
                  {"name": "mlx5_2", "hca_type": "MT4129", "board_id": None, "fw_ver": None},
                  {"name": "mlx5_3", "hca_type": "MT4129", "fw_ver": "20.0", "virtual_function": True},
                  {"name": "mlx5_4", "hca_type": "MT4123", "board_id": "MT_0000000222", "fw_ver": "20.1"}],
         "nvme": [{"name": "nvme0", "model": "SAMSUNG MZWLR3T8HBLS-00007", "firmware": "MPK7525Q"}]}


def test_due_from_facts_runs_the_tools_only_below_the_minimum_or_without_a_version():
    due = fw.due_from_facts(FACTS, {"MT4129": "28.39.1002"}, {"SAMSUNG MZWLR3T8HBLS": "MPK7525Q"})
    assert [n["name"] for n in due["nic"]] == ["mlx5_1", "mlx5_2"] and due["nvme"] == []
    assert due["reasons"] == ["mlx5_1 28.38.1000 below the minimum 28.39.1002", "mlx5_2: no firmware version in the facts"]
    assert due["at_minimum"] == ["mlx5_0 at 28.39.1002 (minimum 28.39.1002)", "nvme0 at MPK7525Q (minimum MPK7525Q)"]


def test_due_from_facts_converged_and_downgrade():
    converged = {"nics": [dict(FACTS["nics"][0])], "nvme": FACTS["nvme"]}
    due = fw.due_from_facts(converged, {"MT4129": "28.39.1002"}, {})
    assert due["nic"] == [] and due["nvme"] == [] and due["reasons"] == []
    # allow_downgrade with an image of the kind: the tools read the device (an older image may be meant)
    due = fw.due_from_facts(converged, {"MT4129": "28.39.1002"}, {"SAMSUNG": "MPK7525Q"}, True, [{"type": "nvme"}])
    assert due["nic"] == [] and [d["name"] for d in due["nvme"]] == ["nvme0"]
