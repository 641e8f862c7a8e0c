"""mlxconfig/mlxfwmanager/flint parsers on samples written after the tools' documented output."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import nic

MLXCONFIG_E = """
Device #1:
----------

Device type:    ConnectX7
Name:           MCX75310AAS-NEA_Ax
Description:    NVIDIA ConnectX-7 HHHL Adapter card; 400GbE / NDR IB (default mode); Single-port OSFP; PCIe 5.0 x16
Device:         0000:19:00.0

Configurations:                                      Default         Current         Next Boot
*        ATS_ENABLED                                 False(0)        False(0)        True(1)
         SRIOV_EN                                    False(0)        False(0)        False(0)
         LINK_TYPE_P1                                IB(1)           IB(1)           IB(1)
         NUM_OF_VFS                                  0               0               0
The '*' shows parameters with next value different from default/current value.
"""

MLXCONFIG_PLAIN = """
Device #1:
----------

Device type:    ConnectX7
Device:         0000:19:00.0

Configurations:                              Next Boot
         ATS_ENABLED                         False(0)
"""


def test_mlxconfig_e_columns_and_star():
    got = nic.parse_mlxconfig_query(MLXCONFIG_E)
    assert got["device"] == "0000:19:00.0" and got["type"] == "ConnectX7" and got["name"] == "MCX75310AAS-NEA_Ax"
    assert got["columns"] == ["default", "current", "next_boot"]
    assert got["params"]["ATS_ENABLED"] == {"default": 0, "current": 0, "next_boot": 1, "modified": True}
    assert got["params"]["LINK_TYPE_P1"]["current"] == 1
    assert got["params"]["NUM_OF_VFS"] == {"default": 0, "current": 0, "next_boot": 0, "modified": False}


def test_mlxconfig_without_e_and_garbage():
    got = nic.parse_mlxconfig_query(MLXCONFIG_PLAIN)
    assert got["columns"] == ["next_boot"] and got["params"]["ATS_ENABLED"] == {"next_boot": 0, "modified": False}
    with pytest.raises(ValueError, match="no Configurations table"):
        nic.parse_mlxconfig_query("-E- Failed to open device: 0000:19:00.0")
    with pytest.raises(ValueError, match="has 2 values, the header names 3"):
        nic.parse_mlxconfig_query(MLXCONFIG_E.replace("False(0)        True(1)", "True(1)"))


def test_config_plan_next_boot_vs_current():
    query = nic.parse_mlxconfig_query(MLXCONFIG_E)
    # Next Boot already True (an earlier, interrupted run): nothing to set, still pending -> reboot
    got = nic.config_plan(query, {"ATS_ENABLED": 1})
    assert got["set"] == {} and got["pending"] == {"ATS_ENABLED": (0, 1)}
    assert got["reasons"] == ["NIC 0000:19:00.0 ATS_ENABLED: Next Boot 1, Current 0"]
    got = nic.config_plan(query, {"ATS_ENABLED": 0, "SRIOV_EN": 0})
    assert got["set"] == {"ATS_ENABLED": 0} and got["pending"] == {}
    with pytest.raises(ValueError, match="0000:19:00.0: mlxconfig has no parameter ADVANCED_PCI_SETTINGS"):
        nic.config_plan(query, {"ADVANCED_PCI_SETTINGS": 1})


MLXFWMANAGER = """
Querying Mellanox devices firmware ...

Device #1:
----------

  Device Type:      ConnectX7
  Part Number:      MCX75310AAS-NEA_Ax
  Description:      NVIDIA ConnectX-7 HHHL Adapter card; 400GbE / NDR IB (default mode); Single-port OSFP
  PSID:             MT_0000000838
  PCI Device Name:  0000:19:00.0
  Base GUID:        946dae0300f3a2b8
  Versions:         Current        Available
     FW             28.39.1002     28.40.1000
     PXE            3.7.0201       N/A
     UEFI           14.32.0012     N/A

  Status:           Update required

Device #2:
----------

  Device Type:      ConnectX6DX
  Part Number:      MCX623106AN-CDA_Ax
  PSID:             MT_0000000359
  PCI Device Name:  0000:9d:00.0
  Versions:         Current        Available
     FW             22.36.1010     N/A

  Status:           No matching image found
"""


def test_mlxfwmanager_query():
    got = nic.parse_mlxfwmanager_query(MLXFWMANAGER)
    assert [(d["pci"], d["psid"], d["fw"], d["fw_available"], d["type"]) for d in got] == [
        ("0000:19:00.0", "MT_0000000838", "28.39.1002", "28.40.1000", "ConnectX7"),
        ("0000:9d:00.0", "MT_0000000359", "22.36.1010", None, "ConnectX6DX")]
    assert got[1]["status"] == "No matching image found"
    with pytest.raises(ValueError, match="without FW version or PSID"):
        nic.parse_mlxfwmanager_query("Device #1:\n  PCI Device Name:  0000:19:00.0\n")


def test_flint_query_running_line():
    text = ("Image type:            FS4\nFW Version:            28.40.1000\nFW Version(Running):   28.39.1002\n"
            "FW Release Date:       30.11.2023\nProduct Version:       28.40.1000\n"
            "Rom Info:              type=UEFI version=14.32.17 cpu=AMD64,AARCH64\nPSID:                  MT_0000000838\n")
    got = nic.parse_flint_query(text)
    assert (got["fw"], got["fw_running"], got["psid"], got["image_type"]) == ("28.40.1000", "28.39.1002", "MT_0000000838", "FS4")
    plain = nic.parse_flint_query("FW Version:            28.39.1002\nPSID:                  MT_0000000838\n")
    assert plain["fw_running"] == "28.39.1002"
    with pytest.raises(ValueError, match="no FW Version or PSID"):
        nic.parse_flint_query("-E- Cannot open Device: 0000:19:00.0. No such file or directory")


def test_check_query_names_the_device_and_the_row_that_did_not_parse():
    nic.check_query(nic.parse_mlxconfig_query(MLXCONFIG_E), ["ATS_ENABLED"], "0000:19:00.0")
    broken = nic.parse_mlxconfig_query(MLXCONFIG_E.replace("False(0)        True(1)", "False(0)        Maybe"))
    with pytest.raises(ValueError, match=r"0000:19:00.0: mlxconfig row '\* +ATS_ENABLED .*Maybe': next boot value 'Maybe'"):
        nic.check_query(broken, ["SRIOV_EN"], "0000:19:00.0")      # a row printed beside the wanted one
    with pytest.raises(ValueError, match="0000:19:00.0: mlxconfig has no parameter NO_SUCH"):
        nic.check_query(nic.parse_mlxconfig_query(MLXCONFIG_E), ["NO_SUCH"], "0000:19:00.0")
    with pytest.raises(ValueError, match="ATS_ENABLED is listed twice"):
        nic.parse_mlxconfig_query(MLXCONFIG_E + "         ATS_ENABLED    False(0)  False(0)  False(0)\n")
