"""The twins' device tool stand-ins (lab/repo/files/twin-devtools) and what a twin's boot does with
their state (lab/twin/boot.py), on a rendered hardware view in a temporary folder: what the stand-ins
print is read back by our own parsers and by node_facts, and compared with values written here."""
import importlib.util
import json
import os
import subprocess

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs, firmware, nic
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from lab.hw import fixtures, render

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOOL = os.path.join(REPO, "lab", "repo", "files", "twin-devtools")


@pytest.fixture
def twin(tmp_path):
    root = str(tmp_path / "root")
    render.render(fixtures.load_model("hgx-h100"), {"acs": {"0000:17:00.0": ["ReqRedir", "CmpltRedir"]}}, root)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("setpci", "mlxconfig", "flint", "mlxfwmanager", "nvme"):
        os.symlink(TOOL, str(bindir / name))
    env = dict(os.environ, TWIN_ROOT=root, TWIN_DEVICE_STATE=str(tmp_path / "devices.json"))

    def run(*argv, ok=True):
        # through the link name: the stand-in dispatches on argv[0]
        proc = subprocess.run([str(bindir / argv[0])] + list(argv[1:]), env=env, capture_output=True, text=True, check=False)
        assert (proc.returncode == 0) == ok, proc.stderr
        return proc.stdout if ok else proc.stderr
    run.root, run.state, run.tmp = root, str(tmp_path / "devices.json"), tmp_path
    return run


def test_setpci_reads_and_writes_the_rendered_acs_control(twin):
    assert twin("setpci", "-s", "0000:17:00.0", "ECAP_ACS+0x6.w").strip() == "000c"
    twin("setpci", "-s", "0000:17:00.0", "ECAP_ACS+0x6.w=005d:007f")
    # EgressCtrl (bit 5) is not in the rendered capability (0x5f): DirectTrans, ReqRedir... are
    assert twin("setpci", "-s", "17:00.0", "ECAP_ACS+0x6.w").strip() == "005d"
    facts, _ = collect(twin.root)
    assert facts["pcie"]["bridges"]["0000:17:00.0"]["acs"]["ctl"] == acs.HOST_MODES["virtualization"]
    assert "No devices selected" in twin("setpci", "-s", "0000:99:99.0", "ECAP_ACS+0x6.w", ok=False)


def test_converge_with_the_setpci_stand_in(twin):
    def runner(argv):
        proc = subprocess.run(argv, env=dict(os.environ, TWIN_ROOT=twin.root), capture_output=True, text=True)
        return proc.returncode, proc.stdout, proc.stderr
    setpci = str(twin.tmp / "bin" / "setpci")
    check = acs.converge(twin.root, acs.HOST_MODES["bare_metal"], runner, check=True, setpci=setpci)
    assert [i["bdf"] for i in check if i["change"]] == ["0000:17:00.0"] and not any(i["written"] for i in check)
    assert twin("setpci", "-s", "0000:17:00.0", "ECAP_ACS+0x6.w").strip() == "000c"   # check mode wrote nothing
    done = acs.converge(twin.root, acs.HOST_MODES["bare_metal"], runner, setpci=setpci)
    assert [i["bdf"] for i in done if i["written"]] == ["0000:17:00.0"]
    # 8 GPU-NIC pairs x 3 bridges (two downstream ports and the switch's upstream port)
    assert len(done) == 24
    again = acs.converge(twin.root, acs.HOST_MODES["bare_metal"], runner, setpci=setpci)
    assert not any(i["change"] for i in again)


def test_mlxconfig_next_boot_becomes_current_at_boot(twin, monkeypatch):
    query = nic.parse_mlxconfig_query(twin("mlxconfig", "-e", "-d", "0000:19:00.0", "q", "ATS_ENABLED"))
    assert query["params"]["ATS_ENABLED"] == {"default": 0, "current": 0, "next_boot": 0, "modified": False}
    assert "-y" in twin("mlxconfig", "-d", "0000:19:00.0", "set", "ATS_ENABLED=1", ok=False)
    twin("mlxconfig", "-y", "-d", "0000:19:00.0", "set", "ATS_ENABLED=1")
    query = nic.parse_mlxconfig_query(twin("mlxconfig", "-e", "-d", "0000:19:00.0", "q", "ATS_ENABLED"))
    assert query["params"]["ATS_ENABLED"] == {"default": 0, "current": 0, "next_boot": 1, "modified": True}
    boot = load_boot(monkeypatch, twin.state)
    nic_fw, _ = boot.boot_devices()
    query = nic.parse_mlxconfig_query(twin("mlxconfig", "-e", "-d", "0000:19:00.0", "q", "ATS_ENABLED"))
    assert query["params"]["ATS_ENABLED"]["current"] == 1 and nic_fw["mlx5_0"] == "28.39.1002"


def load_boot(monkeypatch, state):
    monkeypatch.setenv("TWIN_DEVICE_STATE", state)
    monkeypatch.setenv("TWIN_SYSROOT", "/")
    spec = importlib.util.spec_from_file_location("twin_boot_under_test", os.path.join(REPO, "lab", "twin", "boot.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flint_burn_refuses_another_psid_and_runs_after_boot(twin, monkeypatch):
    good = twin.tmp / "good.bin"
    good.write_text("GPUFLEET-LAB-FW kind=nic psid=MT_0000000838 version=28.40.1000\n")
    bad = twin.tmp / "bad.bin"
    bad.write_text("GPUFLEET-LAB-FW kind=nic psid=MT_0000000359 version=28.40.1000\n")
    assert nic.parse_flint_query(twin("flint", "-i", str(bad), "q"))["psid"] == "MT_0000000359"
    assert "PSID mismatch" in twin("flint", "-d", "0000:19:00.0", "-i", str(bad), "-y", "burn", ok=False)
    twin("flint", "-d", "0000:19:00.0", "-i", str(good), "-y", "burn")
    q = nic.parse_flint_query(twin("flint", "-d", "0000:19:00.0", "q"))
    assert (q["fw"], q["fw_running"], q["psid"]) == ("28.40.1000", "28.39.1002", "MT_0000000838")
    devices = nic.parse_mlxfwmanager_query(twin("mlxfwmanager", "--query"))
    assert [d["fw"] for d in devices if d["pci"] == "0000:19:00.0"] == ["28.39.1002"]
    boot = load_boot(monkeypatch, twin.state)
    nic_fw, _ = boot.boot_devices()
    assert nic_fw["mlx5_0"] == "28.40.1000"
    # the boot hands it to the renderer: sysfs fw_ver shows the new running version
    root = str(twin.tmp / "booted")
    render.render(fixtures.load_model("hgx-h100"), {"nic_firmware": nic_fw}, root)
    facts, _ = collect(root)
    assert [n["fw_ver"] for n in facts["nics"] if n["name"] == "mlx5_0"] == ["28.40.1000"]


def test_nvme_commit_activates_at_the_next_reset_and_rejects_another_model(twin, monkeypatch):
    other = twin.tmp / "other.bin"
    other.write_text("GPUFLEET-LAB-FW kind=nvme model=MICRON 7450 version=E2MU200\n")
    twin("nvme", "fw-download", "/dev/nvme0", "--fw=%s" % other)
    assert "INVALID_FW_IMAGE" in twin("nvme", "fw-commit", "/dev/nvme0", "--slot=0", "--action=1", ok=False)
    image = twin.tmp / "nvme.bin"
    image.write_text("GPUFLEET-LAB-FW kind=nvme model=SAMSUNG MZWLR3T8HBLS version=MPK7526Q\n")
    twin("nvme", "fw-download", "/dev/nvme0", "--fw=%s" % image)
    twin("nvme", "fw-commit", "/dev/nvme0", "--slot=0", "--action=1")
    log = firmware.parse_nvme_fw_log(twin("nvme", "fw-log", "/dev/nvme0"))
    assert (log["active"], log["next"]) == ("MPK7525Q", "MPK7526Q")
    assert firmware.parse_nvme_id_ctrl(twin("nvme", "id-ctrl", "/dev/nvme0"))["firmware"] == "MPK7525Q"
    boot = load_boot(monkeypatch, twin.state)
    _, nvme_fw = boot.boot_devices()
    assert nvme_fw == {"nvme0": "MPK7526Q"}
    with open(twin.state) as handle:
        assert json.load(handle)["nvme"]["nvme0"]["pending"] is None
