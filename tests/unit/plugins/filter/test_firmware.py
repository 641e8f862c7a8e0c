"""firmware_due: the firmware role's decision from the node facts (the planner is tested in _devices/test_firmware.py)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import firmware


def test_firmware_due_filter():
    facts = {"nics": [{"name": "mlx5_0", "hca_type": "MT4129", "fw_ver": "28.38.1000"}], "nvme": None}
    assert firmware.firmware_due(facts, {"MT4129": "28.39.1002"}, None)["reasons"] == [
        "mlx5_0 28.38.1000 below the minimum 28.39.1002"]
    with pytest.raises(AnsibleFilterError, match="expected the node facts"):
        firmware.firmware_due(None, {}, {})
