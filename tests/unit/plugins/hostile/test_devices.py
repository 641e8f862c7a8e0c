"""Hostile input for the device and OS-state writers: tuning, pcie_acs, nic_config, storage_mount,
image_manifest. Each case ends in a clear error naming the input with nothing written (no temporary
file left), or the documented result; check mode raises the same validation errors."""
import json
import os
import stat

import pytest

COVERS = ["module:tuning", "module:pcie_acs", "module:nic_config", "module:storage_mount", "module:image_manifest"]


def _tree(top):
    """{relative path: (kind, content)} of everything under ``top``: what a failed run must not change."""
    out = {}
    for base, dirs, files in os.walk(str(top)):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, str(top))
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    out[rel] = ("file", handle.read(), stat.S_IMODE(st.st_mode))
            else:
                out[rel] = (stat.S_IFMT(st.st_mode), None, None)
    return out


def _no_temp(top):
    left = [os.path.join(b, n) for b, _d, f in os.walk(str(top)) for n in f if "gpufleet-new" in n or n.endswith(".tmp")]
    assert left == [], "temporary files left: %s" % left


# ---- tuning ---------------------------------------------------------------------------------------

def _hw(tmp_path):
    hw = tmp_path / "hw"
    files = {"sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
             "proc/sys/kernel/numa_balancing": "1\n",
             "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "64\n",
             "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave\n",
             "sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors": "performance powersave\n"}
    for rel, text in files.items():
        (hw / rel).parent.mkdir(parents=True, exist_ok=True)
        (hw / rel).write_text(text)
    root = tmp_path / "root"
    root.mkdir()
    return root, hw


def _tuning(root, hw, **kw):
    args = {"hugepages": {"1048576": 128}, "thp": "never", "numa_balancing": 0, "governor": "performance",
            "root": str(root), "hardware_root": str(hw)}
    args.update(kw)
    return args


@pytest.mark.parametrize("kw, names", [
    ({"hugepages": {"abc": 4}}, ["hugepages", "abc", "page size"]),
    ({"hugepages": {"../../../etc/x": 4}}, ["hugepages", "../../../etc/x"]),
    ({"hugepages": {"1048576": "abc"}}, ["hugepages.1048576", "abc", "page count"]),
    ({"hugepages": {"1048576": -5}}, ["hugepages.1048576", "-5"]),
    ({"hugepages": {"1048576": 1.5}}, ["hugepages.1048576", "1.5"]),
    ({"hugepages": {"1048576": True}}, ["hugepages.1048576", "true"]),
    ({"hugepages": {"1048576": None}}, ["hugepages.1048576", "none"]),
    ({"governor": "perf ormance"}, ["governor", "perf ormance"]),
    ({"governor": "performance\npowersave"}, ["governor", "performance\\npowersave"]),
    ({"governor": "../../x"}, ["governor", "../../x"]),
    ({"governor": ""}, ["governor"]),
    ({"governor": "'; reboot; '"}, ["governor"]),
])
@pytest.mark.parametrize("check", [False, True])
def test_tuning_values_that_do_not_parse(run_module, clear_error, tmp_path, kw, names, check):
    root, hw = _hw(tmp_path)
    before = _tree(tmp_path)
    clear_error(run_module("tuning", _tuning(root, hw, **kw), check=check), *names)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("rel, make, names", [
    ("proc/sys/kernel/numa_balancing", "binary", ["numa_balancing", "not utf-8"]),
    ("proc/sys/kernel/numa_balancing", "fifo", ["numa_balancing", "fifo"]),
    ("proc/sys/kernel/numa_balancing", "folder", ["numa_balancing", "folder"]),
    ("sys/kernel/mm/transparent_hugepage/enabled", "fifo", ["transparent_hugepage/enabled", "fifo"]),
    ("sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "garbage", ["nr_hugepages", "cannot parse"]),
    ("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "fifo", ["scaling_governor", "fifo"]),
])
def test_tuning_hardware_files_that_are_not_what_the_kernel_shows(run_module, clear_error, tmp_path, rel, make, names):
    root, hw = _hw(tmp_path)
    path = hw / rel
    path.unlink()
    if make == "binary":
        path.write_bytes(b"\xff\xfe\x00\x01")
    elif make == "fifo":
        os.mkfifo(str(path))
    elif make == "folder":
        path.mkdir()
    else:
        path.write_text("lots\n")
    before = _tree(tmp_path)
    clear_error(run_module("tuning", _tuning(root, hw)), *names)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("make", ["fifo", "folder"])
def test_tuning_persistent_file_that_is_not_a_file(run_module, clear_error, tmp_path, make):
    root, hw = _hw(tmp_path)
    target = root / "etc/sysctl.d/90-gpufleet-tuning.conf"
    target.parent.mkdir(parents=True)
    os.mkfifo(str(target)) if make == "fifo" else target.mkdir()
    before = _tree(tmp_path)
    for check in (True, False):
        clear_error(run_module("tuning", _tuning(root, hw), check=check), "90-gpufleet-tuning.conf", make)
        assert _tree(tmp_path) == before


def test_tuning_binary_persistent_file_is_rewritten(run_module, succeeded, tmp_path):
    root, hw = _hw(tmp_path)
    target = root / "etc/sysctl.d/90-gpufleet-tuning.conf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\xff\xfe binary \x00")
    out = run_module("tuning", _tuning(root, hw, runtime=False))
    succeeded(out)
    assert target.read_text().endswith("kernel.numa_balancing = 0\n")
    _no_temp(root)


def test_tuning_root_whose_parent_is_a_file_writes_nothing(run_module, clear_error, tmp_path):
    _root, hw = _hw(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    before = _tree(tmp_path)
    for check in (True, False):
        clear_error(run_module("tuning", _tuning(blocker / "root", hw), check=check), str(blocker), "not a folder")
        assert _tree(tmp_path) == before


def test_tuning_second_file_blocked_writes_not_the_first(run_module, clear_error, tmp_path):
    root, hw = _hw(tmp_path)
    (root / "usr/local").mkdir(parents=True)
    (root / "usr/local/sbin").write_text("a file where the script's folder goes\n")
    before = _tree(tmp_path)
    clear_error(run_module("tuning", _tuning(root, hw)), "usr/local/sbin", "not a folder")
    assert _tree(tmp_path) == before


# ---- pcie_acs -------------------------------------------------------------------------------------

def _boot(tmp_path, **file_kw):
    item = {"path": str(tmp_path / "etc/gpufleet/pcie-acs.json"), "content": "{}\n"}
    item.update(file_kw)
    return {"host_mode": "bare_metal", "set_now": False, "boot": {"files": [item], "unit": ""}}


@pytest.mark.parametrize("kw, names", [
    ({"mode": "abc"}, ["mode", "abc", "octal"]),
    ({"mode": "0999"}, ["mode", "0999"]),
    ({"mode": "-1"}, ["mode", "-1"]),
    ({"mode": "777777"}, ["mode", "777777"]),
    ({"path": "relative/pcie-acs.json"}, ["relative/pcie-acs.json", "absolute"]),
])
@pytest.mark.parametrize("check", [False, True])
def test_pcie_acs_boot_file_modes_and_paths_that_do_not_parse(run_module, clear_error, tmp_path, kw, names, check):
    before = _tree(tmp_path)
    clear_error(run_module("pcie_acs", _boot(tmp_path, **kw), check=check), *names)
    assert _tree(tmp_path) == before


def test_pcie_acs_unknown_host_mode(run_module, clear_error, tmp_path):
    args = dict(_boot(tmp_path), host_mode="passthrough")
    clear_error(run_module("pcie_acs", args), "host_mode", "passthrough")


@pytest.mark.parametrize("unit", ["--root=/tmp", "../x.service", "a b.service", "gpufleet-pcie-acs"])
def test_pcie_acs_unit_that_is_no_unit_name(run_module, clear_error, tmp_path, unit):
    args = _boot(tmp_path)
    args["boot"]["unit"] = unit
    before = _tree(tmp_path)
    clear_error(run_module("pcie_acs", args), "boot.unit", unit)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("make", ["fifo", "folder"])
def test_pcie_acs_boot_file_that_is_not_a_file(run_module, clear_error, tmp_path, make):
    target = tmp_path / "etc/gpufleet/pcie-acs.json"
    target.parent.mkdir(parents=True)
    os.mkfifo(str(target)) if make == "fifo" else target.mkdir()
    before = _tree(tmp_path)
    clear_error(run_module("pcie_acs", _boot(tmp_path)), str(target), make)
    assert _tree(tmp_path) == before


def test_pcie_acs_second_boot_file_blocked_writes_not_the_first(run_module, clear_error, tmp_path):
    (tmp_path / "lib").write_text("a file where a folder goes\n")
    args = _boot(tmp_path)
    args["boot"]["files"].append({"path": str(tmp_path / "lib/gpufleet-pcie/acs"), "content": "x\n"})
    before = _tree(tmp_path)
    clear_error(run_module("pcie_acs", args), str(tmp_path / "lib"), "not a folder")
    assert _tree(tmp_path) == before


def test_pcie_acs_boot_files_written_whole(run_module, succeeded, tmp_path):
    out = run_module("pcie_acs", _boot(tmp_path, mode="0640"))
    succeeded(out)
    target = tmp_path / "etc/gpufleet/pcie-acs.json"
    assert target.read_text() == "{}\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    _no_temp(tmp_path)


# A bridge's config space that is not one: too short (not root), or an extended capability list
# that points at itself, at the end of the space, or nowhere. Built by hand: 4 KiB, ACS absent or
# its header where the walk cannot reach it.
_LOOP = b"\x00" * 256 + b"\x01\x00\x01\x10" + b"\x00" * (4096 - 260)          # AER pointing back at 0x100
_PAST_END = b"\x00" * 256 + b"\x01\x00\x01\xff" + b"\x00" * (4096 - 260)      # next at 0xff0 (+8 past the end)
_CONFIGS = [("empty", b""), ("256 bytes", b"\x00" * 256), ("all ones", b"\xff" * 4096), ("loop", _LOOP), ("past end", _PAST_END)]


@pytest.mark.parametrize("name, config", _CONFIGS, ids=[c[0] for c in _CONFIGS])
def test_pcie_acs_bridge_config_space_garbage(run_module, unpacked_tree, name, config):
    root = unpacked_tree("hgx-h100-ref")
    with open(os.path.join(root, "sys/bus/pci/devices/0000:17:00.0/config"), "wb") as handle:
        handle.write(config)
    out = run_module("pcie_acs", {"root": root, "host_mode": "bare_metal", "setpci": "/bin/false"}, check=True)
    assert not out["_traceback"], out["_stderr"][-2000:]
    if out.failed:   # a space without ACS is a bridge without ACS (nothing to set); a broken one is named
        assert "0000:17:00.0" in out.msg, out.msg
    else:
        assert [b for b in out["bridges"] if b["bdf"] == "0000:17:00.0"][0]["present"] is False


@pytest.mark.parametrize("make", ["fifo", "folder"])
def test_pcie_acs_bridge_config_that_is_not_a_file(run_module, clear_error, unpacked_tree, make):
    root = unpacked_tree("hgx-h100-ref")
    config = os.path.join(root, "sys/bus/pci/devices/0000:17:00.0/config")
    os.unlink(os.path.realpath(config))
    os.mkfifo(os.path.realpath(config)) if make == "fifo" else os.mkdir(os.path.realpath(config))
    clear_error(run_module("pcie_acs", {"root": root, "host_mode": "bare_metal", "setpci": "/bin/false"}), "0000:17:00.0")


# ---- nic_config -----------------------------------------------------------------------------------

_QUERY = """
Device #1:
----------

Device type:    ConnectX7
Device:         {pci}

Configurations:                                      Default         Current         Next Boot
         ATS_ENABLED                                 {row}
"""

# A stand-in for mlxconfig: records every invocation, answers each device's query from a file
# (FAKE_MLX/<pci>.q, a row of three values), takes every set.
_FAKE = """#!/bin/sh
echo "$*" >> "$FAKE_MLX/calls"
for a in "$@"; do
  case "$a" in
    set) exit 0;;
    q) cat "$FAKE_MLX/$dev.q"; exit 0;;
  esac
  dev="$a"
done
exit 1
"""


@pytest.fixture
def mlx(tmp_path):
    folder = tmp_path / "mlx"
    folder.mkdir()
    tool = folder / "mlxconfig"
    tool.write_text(_FAKE)
    tool.chmod(0o755)

    def answer(pci, row):
        (folder / (pci + ".q")).write_text(_QUERY.format(pci=pci, row=row))

    def calls():
        path = folder / "calls"
        return path.read_text().splitlines() if path.exists() else []
    answer.tool, answer.calls, answer.env = str(tool), calls, {"FAKE_MLX": str(folder)}
    return answer


def _nic(run_module, mlx, args, check=False):
    return run_module("nic_config", dict({"mlxconfig": mlx.tool}, **args), check=check, env=mlx.env)


@pytest.mark.parametrize("row", [
    "False(0)        False(0)        Garbage",
    "False(0)        True(x)         False(0)",
    "False(0)        False(0)        False(0)        extra",
    "False(0)        False(0)",
    "False(0)        False(0)        False(0)\n         SRIOV_EN      False(0)        ???        False(0)",
])
@pytest.mark.parametrize("check", [False, True])
def test_nic_config_unparsable_row_sets_nothing_on_any_device(run_module, clear_error, mlx, row, check):
    mlx("0000:19:00.0", "False(0)        False(0)        False(0)")    # this one parses and would need a set
    mlx("0000:2a:00.0", row)
    out = _nic(run_module, mlx, {"devices": ["0000:19:00.0", "0000:2a:00.0"], "settings": {"ATS_ENABLED": 1}}, check)
    clear_error(out, "0000:2a:00.0", "SRIOV_EN" if "SRIOV_EN" in row else "ATS_ENABLED")
    assert [c for c in mlx.calls() if " set " in c] == []


@pytest.mark.parametrize("settings, names", [
    ({"ATS_ENABLED": "abc"}, ["settings.ATS_ENABLED", "abc"]),
    ({"ATS_ENABLED": -5}, ["settings.ATS_ENABLED", "-5"]),
    ({"ATS_ENABLED": 1.5}, ["settings.ATS_ENABLED", "1.5"]),
    ({"ATS_ENABLED": None}, ["settings.ATS_ENABLED", "none"]),
    ({"ATS_ENABLED=1 SRIOV_EN": 1}, ["settings", "ATS_ENABLED=1 SRIOV_EN"]),
    ({"-y": 1}, ["settings", "-y"]),
])
@pytest.mark.parametrize("check", [False, True])
def test_nic_config_settings_that_are_no_mlxconfig_values(run_module, clear_error, mlx, settings, names, check):
    mlx("0000:19:00.0", "False(0)        False(0)        False(0)")
    clear_error(_nic(run_module, mlx, {"devices": ["0000:19:00.0"], "settings": settings}, check), *names)
    assert mlx.calls() == []


@pytest.mark.parametrize("device", ["", "-y", "0000:19:00.0 0000:2a:00.0", "0000:19:00.0\n"])
def test_nic_config_device_that_is_no_device(run_module, clear_error, mlx, device):
    clear_error(_nic(run_module, mlx, {"devices": [device], "settings": {"ATS_ENABLED": 1}}), "devices")
    assert mlx.calls() == []


def test_nic_config_parsed_rows_set_then_done(run_module, succeeded, mlx):
    mlx("0000:19:00.0", "False(0)        False(0)        False(0)")
    out = _nic(run_module, mlx, {"devices": ["0000:19:00.0"], "settings": {"ATS_ENABLED": True}}, check=True)
    succeeded(out)
    assert out["changed"] and out["devices"]["0000:19:00.0"]["set"] == {"ATS_ENABLED": 1}
    assert [c for c in mlx.calls() if " set " in c] == []


# ---- storage_mount --------------------------------------------------------------------------------

def _mount(tmp_path, **kw):
    fstab = tmp_path / "fstab"
    if not fstab.exists():
        fstab.write_text("UUID=aaaa / ext4 defaults 0 1\n")
    args = {"path": "/srv/gpufleet-hostile-never", "device": "/nonexistent/gpufleet-disk", "fstype": "ext4",
            "fstab": str(fstab)}
    args.update(kw)
    return args


@pytest.mark.parametrize("kw, names", [
    ({"path": "raid"}, ["path", "raid", "absolute"]),
    ({"path": "/raid\nUUID=x / ext4 defaults 0 0"}, ["path"]),
    ({"path": "/ra\tid"}, ["path"]),
    ({"path": "/raid/../etc"}, ["path", ".."]),
    ({"path": "/"}, ["path", "root"]),
    ({"device": "disk"}, ["device", "disk", "absolute"]),
    ({"options": "defaults\nUUID=x /etc ext4 defaults 0 0"}, ["options"]),
    ({"options": "defaults noatime"}, ["options", "defaults noatime"]),
    ({"options": "defaults,#x"}, ["options"]),
    ({"options": "defaults,,noatime"}, ["options"]),
    ({"options": ""}, ["options"]),
    ({"fstype": "ext4 defaults"}, ["fstype", "ext4 defaults"]),
    ({"fstype": "-F"}, ["fstype", "-F"]),
    ({"min_size_gb": -1}, ["min_size_gb", "-1"]),
    ({"min_size_gb": "nan"}, ["min_size_gb", "nan"]),
    ({"min_size_gb": "inf"}, ["min_size_gb", "inf"]),
    ({"min_size_gb": "abc"}, ["min_size_gb"]),
    ({"fstab": "etc/fstab"}, ["fstab", "etc/fstab"]),
])
@pytest.mark.parametrize("check", [False, True])
def test_storage_mount_nonsense_options(run_module, clear_error, tmp_path, kw, names, check):
    args = _mount(tmp_path, **kw)
    before = _tree(tmp_path)
    clear_error(run_module("storage_mount", args, check=check), *names)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("make, names", [
    ("fifo", ["fifo"]), ("folder", ["folder"]), ("binary", ["utf-8"]), ("parent is a file", ["not a folder"])])
def test_storage_mount_fstab_that_is_not_a_text_file(run_module, clear_error, tmp_path, make, names):
    fstab = tmp_path / "fstab"
    if make == "fifo":
        os.mkfifo(str(fstab))
    elif make == "folder":
        fstab.mkdir()
    elif make == "binary":
        fstab.write_bytes(b"\xff\xfe\x00UUID")
    else:
        fstab.write_text("")
        fstab = fstab / "fstab"
    args = _mount(tmp_path, fstab=str(fstab))
    before = _tree(tmp_path)
    clear_error(run_module("storage_mount", args), str(fstab), *names)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("make", ["fifo", "folder", "missing"])
def test_storage_mount_device_that_is_no_block_device(run_module, clear_error, tmp_path, make):
    device = tmp_path / "disk"
    if make == "fifo":
        os.mkfifo(str(device))
    elif make == "folder":
        device.mkdir()
    args = _mount(tmp_path, device=str(device))
    before = _tree(tmp_path)
    clear_error(run_module("storage_mount", args), str(device))
    assert _tree(tmp_path) == before


def test_storage_mount_point_that_is_a_file(run_module, clear_error, tmp_path):
    point = tmp_path / "raid"
    point.write_text("")
    args = _mount(tmp_path, path=str(point))
    before = _tree(tmp_path)
    clear_error(run_module("storage_mount", args), str(point), "not a folder")
    assert _tree(tmp_path) == before


# ---- image_manifest -------------------------------------------------------------------------------

_CFG = "menuentry 'Debian' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic root=UUID=u1 ro\n}\n"
_PROFILE = {"name": "mini", "kernel": {"release": "6.8.0-45-generic"}}


def _image_root(tmp_path, manifest=None):
    root = tmp_path / "root"
    (root / "boot/grub").mkdir(parents=True)
    (root / "boot/grub/grub.cfg").write_text(_CFG)
    (root / "etc/gpufleet").mkdir(parents=True)
    path = root / "etc/gpufleet/image.json"
    if isinstance(manifest, bytes):
        path.write_bytes(manifest)
    elif manifest == "fifo":
        os.mkfifo(str(path))
    elif manifest == "folder":
        path.mkdir()
    return root


_BAD_MANIFESTS = [("list", b"[1, 2]"), ("number", b"5"), ("string", b'"x"'), ("null", b"null"),
                  ("pins list", b'{"profile": "mini", "pins": ["a"]}'), ("desired list", b'{"profile": "mini", "desired": []}'),
                  ("binary", b"\xff\xfe\x00"), ("deep", b"[" * 100000 + b"]" * 100000), ("truncated", b'{"profile": "mi')]


@pytest.mark.parametrize("name, data", _BAD_MANIFESTS, ids=[m[0] for m in _BAD_MANIFESTS])
def test_image_manifest_compare_of_a_manifest_that_is_none(run_module, succeeded, tmp_path, name, data):
    root = _image_root(tmp_path, data)
    before = _tree(tmp_path)
    out = run_module("image_manifest", {"profile": _PROFILE, "root": str(root)})
    succeeded(out)
    assert out["match"] is False and not out["changed"] and out["manifest"] is None
    assert "etc/gpufleet/image.json" in out["reasons"][0], out["reasons"]
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("make", ["fifo", "folder"])
def test_image_manifest_that_is_not_a_file(run_module, clear_error, succeeded, tmp_path, make):
    root = _image_root(tmp_path, make)
    before = _tree(tmp_path)
    out = run_module("image_manifest", {"profile": _PROFILE, "root": str(root)})
    succeeded(out)
    assert out["match"] is False and make in out["reasons"][0].lower()
    for check in (True, False):
        out = run_module("image_manifest", {"profile": _PROFILE, "root": str(root), "state": "present"}, check=check)
        clear_error(out, "etc/gpufleet/image.json", make)
        assert _tree(tmp_path) == before


@pytest.mark.parametrize("name, data", _BAD_MANIFESTS[:3], ids=[m[0] for m in _BAD_MANIFESTS[:3]])
def test_image_manifest_present_replaces_a_manifest_that_is_none(run_module, succeeded, tmp_path, name, data):
    root = _image_root(tmp_path, data)
    out = run_module("image_manifest", {"profile": _PROFILE, "root": str(root), "state": "present", "rewashed": True})
    succeeded(out)
    assert out["changed"] and json.loads((root / "etc/gpufleet/image.json").read_text())["profile"] == "mini"
    _no_temp(root)


def test_image_manifest_folder_blocked_writes_nothing(run_module, clear_error, tmp_path):
    root = _image_root(tmp_path)
    (root / "etc/gpufleet").rmdir()
    (root / "etc/gpufleet").write_text("a file where the manifest's folder goes\n")
    before = _tree(tmp_path)
    clear_error(run_module("image_manifest", {"profile": _PROFILE, "root": str(root), "state": "present"}),
                "etc/gpufleet/image.json")
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("grub, names", [("fifo", ["grub.cfg", "fifo"]), ("binary", ["grub.cfg", "utf-8"]),
                                         ("../../etc/passwd", ["grub_cfg", ".."])])
def test_image_manifest_grub_cfg_that_is_no_text(run_module, clear_error, tmp_path, grub, names):
    root = _image_root(tmp_path)
    cfg = root / "boot/grub/grub.cfg"
    args = {"profile": _PROFILE, "root": str(root), "state": "present"}
    if grub == "fifo":
        cfg.unlink()
        os.mkfifo(str(cfg))
    elif grub == "binary":
        cfg.write_bytes(b"\xff\xfe\x00menuentry")
    else:
        args["grub_cfg"] = grub
    before = _tree(tmp_path)
    clear_error(run_module("image_manifest", args), *names)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("profile", [{}, {"name": 5}, {"name": "x", "kernel": "abc"}, {"name": "x", "memory": {"hugepages": "abc"}}])
def test_image_manifest_profile_garbage(run_module, clear_error, tmp_path, profile):
    root = _image_root(tmp_path)
    before = _tree(tmp_path)
    clear_error(run_module("image_manifest", {"profile": profile, "root": str(root), "state": "present"}), "profile")
    assert _tree(tmp_path) == before
