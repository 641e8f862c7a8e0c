"""pcie_acs, nic_config and firmware_flash run through Ansible (ad hoc, local) on a rendered HGX view
with the lab's tool stand-ins (lab/repo/files/twin-devtools): check mode predicts and changes
nothing, the run changes, the second run does not, refusals name the device and the image."""
import json
import os
import subprocess
import sys

import pytest

from lab.hw import fixtures, render

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")
TOOL = os.path.join(REPO, "lab", "repo", "files", "twin-devtools")


@pytest.fixture
def node(tmp_path):
    if not os.path.exists(ANSIBLE):
        pytest.skip("ansible CLI not in this virtualenv")
    root = str(tmp_path / "root")
    render.render(fixtures.load_model("hgx-h100"), {"acs": {"0000:17:00.0": ["ReqRedir", "CmpltRedir"]}}, root)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("setpci", "mlxconfig", "flint", "nvme"):
        os.symlink(TOOL, str(bindir / name))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, TWIN_ROOT=root, TWIN_DEVICE_STATE=str(tmp_path / "devices.json"))

    def run(module, args, check=False, diff=False):
        cmd = [ANSIBLE, "localhost", "-m", "gpufleet.provision." + module, "-a", json.dumps(args)]
        cmd += (["--check"] if check else []) + (["--diff"] if diff else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, check=False)
        head, sep, body = proc.stdout.partition(" => ")
        assert sep, proc.stdout + proc.stderr
        result = json.loads(body)
        result["_out"] = head
        return proc.returncode, result

    def tool(*argv):
        return subprocess.run([str(bindir / argv[0])] + list(argv[1:]), env=env, capture_output=True, text=True, check=True).stdout
    run.root, run.bin, run.tool, run.tmp = root, str(bindir), tool, tmp_path
    return run


def test_pcie_acs_check_apply_idempotent(node):
    args = {"root": node.root, "host_mode": "bare_metal", "setpci": node.bin + "/setpci"}
    rc, res = node("pcie_acs", args, check=True)
    assert rc == 0 and res["changed"] and [b["bdf"] for b in res["bridges"] if b["change"]] == ["0000:17:00.0"]
    assert node.tool("setpci", "-s", "0000:17:00.0", "ECAP_ACS+0x6.w").strip() == "000c"
    rc, res = node("pcie_acs", args)
    assert rc == 0 and res["changed"] and [b["bdf"] for b in res["bridges"] if b["written"]] == ["0000:17:00.0"]
    assert node.tool("setpci", "-s", "0000:17:00.0", "ECAP_ACS+0x6.w").strip() == "0000"
    assert res["reboot_required"] is False
    rc, res = node("pcie_acs", args)
    assert rc == 0 and not res["changed"]
    rc, res = node("pcie_acs", dict(args, host_mode="virtualization"))
    assert rc == 0 and len([b for b in res["bridges"] if b["written"]]) == 24
    assert node.tool("setpci", "-s", "0000:28:00.0", "ECAP_ACS+0x6.w").strip() == "005d"


def test_pcie_acs_with_unreadable_nic_paths_fails_naming_them(node):
    # the NICs' device links broken: node_facts keeps each NIC without a PCI location (a warning each),
    # so GPUs and NICs are there but no GPU-NIC path is: an empty bridge list is an error, never
    # "nothing to do" (the named failures for GPUs and NICs without pairs/bridges are in test_acs.py)
    ib = os.path.join(node.root, "sys", "class", "infiniband")
    for name in os.listdir(ib):
        if os.path.islink(os.path.join(ib, name)):
            target = os.path.realpath(os.path.join(ib, name))
            os.unlink(os.path.join(target, "device"))
            os.symlink("/nowhere", os.path.join(target, "device"))
    rc, res = node("pcie_acs", {"root": node.root, "host_mode": "bare_metal", "setpci": node.bin + "/setpci"})
    assert rc != 0, res
    assert "no GPU-NIC pair on a node with GPUs" in res["msg"] and "mlx5_0" in res["msg"], res["msg"]


def test_nic_config_next_boot_and_reboot_reasons(node):
    args = {"devices": ["0000:19:00.0", "0000:2a:00.0"], "settings": {"ATS_ENABLED": True}, "mlxconfig": node.bin + "/mlxconfig"}
    rc, res = node("nic_config", args, check=True, diff=True)
    assert rc == 0 and res["changed"] and res["reboot_required"]
    assert "+0000:19:00.0 ATS_ENABLED=1" in res["_out"] or res["devices"]["0000:19:00.0"]["set"] == {"ATS_ENABLED": 1}
    assert "False(0)        False(0)" in node.tool("mlxconfig", "-e", "-d", "0000:19:00.0", "q", "ATS_ENABLED")
    rc, res = node("nic_config", args)
    assert rc == 0 and res["changed"]
    assert res["reboot_reasons"] == ["NIC 0000:19:00.0 ATS_ENABLED: Next Boot 1, Current 0",
                                     "NIC 0000:2a:00.0 ATS_ENABLED: Next Boot 1, Current 0"]
    rc, res = node("nic_config", args)
    assert rc == 0 and not res["changed"] and res["reboot_required"]   # still pending: asked again
    rc, res = node("nic_config", dict(args, settings={"NO_SUCH_PARAM": 1}))
    assert rc != 0 and "0000:19:00.0" in res["msg"] and "NO_SUCH_PARAM" in res["msg"]


def image(node, name, text):
    path = node.tmp / name
    path.write_text(text + "\n")
    return str(path)


def test_firmware_flash_nic(node):
    good = image(node, "good.bin", "GPUFLEET-LAB-FW kind=nic psid=MT_0000000838 version=28.40.1000")
    bad = image(node, "bad.bin", "GPUFLEET-LAB-FW kind=nic psid=MT_0000000359 version=28.40.1000")
    base = {"kind": "nic", "device": "0000:19:00.0", "name": "mlx5_0", "match": ["MT4129"],
            "minimums": {"MT4129": "28.40.1000"}, "flint": node.bin + "/flint"}
    rc, res = node("firmware_flash", dict(base, images=[{"path": bad, "psid": "MT_0000000838"}]), check=True)
    assert rc != 0 and res["msg"] == ("firmware_flash: mlx5_0: image %s is for PSID MT_0000000359, the device is PSID "
                                      "MT_0000000838: refused" % bad)
    rc, res = node("firmware_flash", dict(base, images=[{"path": bad}]))
    assert rc != 0 and "no image for it" in res["msg"] and "28.39.1002 below the minimum 28.40.1000" in res["msg"]
    rc, res = node("firmware_flash", dict(base, images=[{"path": good, "version": "28.41.1000"}]))
    assert rc != 0 and "says version 28.40.1000, firmware_images says 28.41.1000: refused" in res["msg"]
    rc, res = node("firmware_flash", dict(base, images=[{"path": good}, {"path": bad}]), check=True)
    assert rc == 0 and res["changed"] and res["next_boot"] == "28.40.1000" and res["reboot_required"]
    assert "FW Version(Running)" not in node.tool("flint", "-d", "0000:19:00.0", "q")
    rc, res = node("firmware_flash", dict(base, images=[{"path": good}, {"path": bad}]))
    assert rc == 0 and res["action"] == "flash" and res["current"] == "28.39.1002" and res["next_boot"] == "28.40.1000"
    assert res["reboot_reasons"] == ["mlx5_0 firmware 28.40.1000 burnt, 28.39.1002 running: active at the next boot"]
    rc, res = node("firmware_flash", dict(base, images=[{"path": good}]))
    assert rc == 0 and not res["changed"] and res["reboot_required"]
    # a NIC whose model has no minimum: nothing, said so
    rc, res = node("firmware_flash", dict(base, minimums={"MT4125": "22.1"}, device="0000:2a:00.0", name="mlx5_1"))
    assert rc == 0 and res["reason"].startswith("mlx5_1 (PSID MT_0000000838): no profile minimum")


def test_firmware_flash_nvme_and_no_downgrade(node):
    img = image(node, "nvme.bin", "GPUFLEET-LAB-FW kind=nvme model=SAMSUNG MZWLR3T8HBLS version=MPK7520Q")
    base = {"kind": "nvme", "device": "/dev/nvme0", "minimums": {"SAMSUNG MZWLR3T8HBLS": "MPK7520Q"}, "nvme": node.bin + "/nvme",
            "images": [{"path": img, "model": "SAMSUNG MZWLR3T8HBLS", "version": "MPK7520Q"}]}
    rc, res = node("firmware_flash", base)     # MPK7525Q running, image older: never downgraded
    assert rc == 0 and not res["changed"] and res["action"] == "none"
    rc, res = node("firmware_flash", dict(base, allow_downgrade=True))
    assert rc == 0 and res["action"] == "flash" and res["next_boot"] == "MPK7520Q"
    assert "frs2 : 0x" in node.tool("nvme", "fw-log", "/dev/nvme0")
    rc, res = node("firmware_flash", dict(base, images=[{"path": img}]), check=True)
    assert rc != 0 and "needs model and version" in res["msg"]


def test_pcie_acs_boot_files_one_call_check_diff_idempotent(node):
    # the boot unit's files in the same call: check mode predicts, the run writes only what differs,
    # an obsolete file goes, a mode is fixed, the second run changes nothing; set_now false reads no hardware
    lib = node.tmp / "lib"
    old = lib / "_facts.py"
    lib.mkdir()
    old.write_text("old flat copy\n")
    files = [{"path": str(lib / "code" / "acs.py"), "content": "print('acs')\n", "diff": False},
             {"path": str(lib / "pcie-acs.json"), "content": '{"host_mode": "bare_metal"}\n'}]
    args = {"root": node.root, "host_mode": "bare_metal", "setpci": node.bin + "/setpci",
            "boot": {"files": files, "absent": [str(old)]}}
    rc, res = node("pcie_acs", args, check=True, diff=True)
    assert rc == 0 and res["changed"], res
    assert sorted((c["path"].rsplit("/", 1)[1], c["action"]) for c in res["boot_changes"]) == [
        ("_facts.py", "remove"), ("acs.py", "create"), ("pcie-acs.json", "create")]
    assert not (lib / "code").exists() and old.exists()
    rc, res = node("pcie_acs", args)
    assert rc == 0 and res["changed"] and len(res["boot_changes"]) == 3
    assert (lib / "code" / "acs.py").read_text() == "print('acs')\n" and not old.exists()
    assert oct(os.stat(str(lib / "pcie-acs.json")).st_mode & 0o777) == "0o644"
    rc, res = node("pcie_acs", args)
    assert rc == 0 and not res["changed"] and res["boot_changes"] == []
    os.chmod(str(lib / "pcie-acs.json"), 0o600)
    files[1]["content"] = '{"host_mode": "virtualization"}\n'
    rc, res = node("pcie_acs", dict(args, set_now=False, host_mode="virtualization"), diff=True)
    assert rc == 0 and res["changed"] and res["bridges"] == [], res
    assert [c["action"] for c in res["boot_changes"]] == ["update"]
    assert oct(os.stat(str(lib / "pcie-acs.json")).st_mode & 0o777) == "0o644"


def test_pcie_acs_tools_missing_read_in_the_same_call(node):
    args = {"root": node.root, "host_mode": "bare_metal", "setpci": node.bin + "/setpci",
            "tools": [node.bin + "/setpci", "no-such-mlxconfig"]}
    rc, res = node("pcie_acs", args, check=True)
    assert rc == 0 and res["tools_missing"] == ["no-such-mlxconfig"], res
