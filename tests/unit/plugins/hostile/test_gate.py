"""Hostile input for the node's facts, the gate, the profile and firmware flashing: unreadable sysfs
(symlink loops, FIFOs, binary files), a garbage profile, options of the wrong type, firmware
versions that do not parse. Each case ends in a clear error naming the input, or in the documented
result where the unreadable input is an ``error`` verdict naming the path: never a traceback, a
hang, or a measured value made up from what could not be read."""
import os

import pytest
import yaml

from ansible.errors import AnsibleError

from ansible_collections.gpufleet.provision.plugins.lookup import profile as profile_lookup
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._devices import firmware as fw
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect

COVERS = ["module:node_facts", "module:validate_node", "module:firmware_flash", "lookup:profile"]

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
NOTHING = {"packages": {}, "services": {}, "commands": {}}


def reference_profile():
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        return yaml.safe_load(handle)


def _warned(outcome):
    """The module's warnings as one text (ansible-core gives each as a string or a mapping with msg)."""
    return " | ".join(w.get("msg", str(w)) if isinstance(w, dict) else str(w) for w in outcome.get("warnings") or [])


def _verdicts(outcome):
    return dict((c["id"], c) for c in outcome["report"]["checks"])


def _gate_run(run_module, root, profile=None, **extra):
    args = dict(NOTHING, root=root, profile=profile or reference_profile(), node="gpu001")
    args.update(extra)
    return run_module("validate_node", args)


def _loop(root, rel):
    """Replace ``rel`` by a symlink to itself (reading it: ELOOP)."""
    path = os.path.join(root, rel)
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    os.symlink(os.path.basename(rel), path)


def _fifo(root, rel):
    path = os.path.join(root, rel)
    os.remove(path)
    os.mkfifo(path)


# ---- 3. a FIFO where a file should be: the modules finish, the path is named ----

def test_fifo_in_sysfs_and_procfs_never_blocks(run_module, unpacked_tree, succeeded):
    root = unpacked_tree("hgx-h100-ref")
    _fifo(root, "proc/cmdline")
    _fifo(root, "sys/class/infiniband/mlx5_0/fw_ver")
    facts = run_module("node_facts", {"root": root})
    succeeded(facts)
    warned = _warned(facts)
    assert "proc/cmdline: not a regular file (a FIFO)" in warned, warned
    assert "sys/class/infiniband/mlx5_0/fw_ver: not a regular file (a FIFO)" in warned, warned
    gated = _gate_run(run_module, root, return_report=True)
    succeeded(gated)
    checks = _verdicts(gated)
    assert checks["kernel.cmdline"]["status"] == "error", checks["kernel.cmdline"]
    assert "proc/cmdline" in checks["kernel.cmdline"]["reason"]
    assert checks["firmware.nic"]["status"] == "error", checks["firmware.nic"]
    assert "sys/class/infiniband/mlx5_0/fw_ver" in checks["firmware.nic"]["reason"]


# ---- 1. unreadable is error, never a measured value ----

@pytest.mark.parametrize("rel, check_id", [
    ("sys/class/infiniband", "nic.rails"),
    ("sys/class/infiniband", "firmware.nic"),
    ("sys/class/iommu", "iommu.enabled"),
    ("sys/kernel/iommu_groups", "iommu.enabled"),
    ("sys/bus/pci/devices", "gpu.count"),
    ("sys/kernel/mm/hugepages", "memory.hugepages"),
    ("sys/devices/system/node", "numa.layout"),
    ("sys/devices/system/cpu", "cpu.smt"),
    ("sys/devices/system/cpu", "cpu.governor"),
    ("sys/class/nvme", "firmware.nvme"),
    ("sys/class/nvme", "nvme.health"),
    ("sys/class/infiniband/mlx5_0/ports", "ib.ports"),
    ("sys/class/infiniband/mlx5_0/ports", "ib.counters"),
    ("sys/class/infiniband/mlx5_0/ports/1/counters", "ib.counters"),
    ("sys/module/nvidia", "nvidia.driver"),
])
def test_unreadable_class_is_an_error_naming_the_path(run_module, unpacked_tree, succeeded, rel, check_id):
    root = unpacked_tree("hgx-h100-ref")
    _loop(root, rel)
    gated = _gate_run(run_module, root, return_report=True)
    succeeded(gated)
    check = _verdicts(gated)[check_id]
    assert check["status"] == "error", (check["status"], check["reason"])
    assert rel in check["reason"], check


def test_unreadable_iommu_is_no_measured_value(unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    _loop(root, "sys/class/iommu")
    facts, warnings = collect(root)
    assert facts["kernel"]["iommu"] is None
    assert any(w.startswith("sys/class/iommu: symlink loop") or w.startswith("sys/class/iommu:") for w in warnings), warnings


def test_unparsable_nic_firmware_is_an_error_naming_device_and_value(run_module, unpacked_tree, succeeded):
    root = unpacked_tree("hgx-h100-ref")
    with open(os.path.join(root, "sys/class/infiniband/mlx5_3/fw_ver"), "w") as handle:
        handle.write("garbage\n")
    gated = _gate_run(run_module, root, return_report=True)
    succeeded(gated)
    check = _verdicts(gated)["firmware.nic"]
    assert check["status"] == "error", check
    assert "mlx5_3" in check["reason"] and "'garbage'" in check["reason"], check


@pytest.mark.parametrize("value", ["garbage", "", "...", "28.39.1002\x00x"])
def test_firmware_plan_refuses_what_it_cannot_compare(value):
    with pytest.raises(fw.FirmwareError) as err:
        fw.plan("mlx5_0", value, None, "28.39.1002", None)
    assert "mlx5_0" in str(err.value)


def test_firmware_due_reads_an_unparsable_version_with_the_tools():
    facts = {"nics": [{"name": "mlx5_0", "hca_type": "MT4129", "fw_ver": "garbage"}]}
    due = fw.due_from_facts(facts, {"MT4129": "28.39.1002"}, {})
    assert [n["name"] for n in due["nic"]] == ["mlx5_0"]
    assert "'garbage'" in due["reasons"][0]


def _fake_flint(tmp_path, running, burnt):
    tool = tmp_path / "flint"
    tool.write_text("#!/bin/sh\ncat <<'EOF'\nImage type:            FS4\nFW Version:            %s\n"
                    "FW Version(Running):   %s\nPSID:                  MT_0000000838\nEOF\n" % (burnt, running))
    tool.chmod(0o755)
    return str(tool)


def test_firmware_flash_fails_on_a_version_it_cannot_compare(run_module, clear_error, tmp_path):
    flint = _fake_flint(tmp_path, "garbage", "garbage")
    image = tmp_path / "fw.bin"
    image.write_text("image")
    out = run_module("firmware_flash", {"kind": "nic", "device": "0000:19:00.0", "name": "mlx5_0", "flint": flint,
                                        "minimums": {"MT_0000000838": "28.39.1002"},
                                        "images": [{"path": str(image), "psid": "MT_0000000838"}]})
    clear_error(out, "mlx5_0", "garbage")


@pytest.mark.parametrize("minimums", [{"MT4129": 28}, {"MT4129": "garbage"}, {"MT4129": None}, {"MT4129": ["1"]}])
def test_firmware_flash_bad_minimums(run_module, clear_error, tmp_path, minimums):
    flint = _fake_flint(tmp_path, "28.39.1002", "28.39.1002")
    out = run_module("firmware_flash", {"kind": "nic", "device": "0000:19:00.0", "name": "mlx5_0", "flint": flint,
                                        "match": ["MT4129"], "minimums": minimums})
    clear_error(out, "MT4129")


@pytest.mark.parametrize("args, names", [
    ({"kind": "nic", "device": "0000:19:00.0", "minimums": "x"}, ["minimums"]),
    ({"kind": "nic", "device": "0000:19:00.0", "minimums": {}, "images": [1]}, ["images"]),
    ({"kind": "nic", "device": "0000:19:00.0", "minimums": {}, "images": [{"psid": "X"}]}, ["image"]),
    ({"kind": "tape", "device": "x", "minimums": {}}, ["kind"]),
])
def test_firmware_flash_bad_options(run_module, clear_error, tmp_path, args, names):
    args = dict(args, flint=_fake_flint(tmp_path, "28.39.1002", "28.39.1002"))
    clear_error(run_module("firmware_flash", args), *names)


# ---- 2. the profile: type and range at load time ----

@pytest.mark.parametrize("patch, where, value", [
    ({"memory": {"hugepages": {"1G": -1}}}, "memory.hugepages.1G", "-1"),
    ({"gpu": {"count": -8}}, "gpu.count", "-8"),
    ({"gpu": {"count": "8"}}, "gpu.count", "'8'"),
    ({"gpu": {"count": 10 ** 9}}, "gpu.count", "1000000000"),
    ({"nic": {"rails": -1}}, "nic.rails", "-1"),
    ({"nic": {"rails": [8]}}, "nic.rails", "[8]"),
    ({"numa": {"nodes": 0}}, "numa.nodes", "0"),
    ({"probes": {"nccl": {"enabled": True, "min_busbw_gbps": -5}}}, "probes.nccl.min_busbw_gbps", "-5"),
    ({"probes": {"h2d": {"enabled": True, "min_gbps": float("nan")}}}, "probes.h2d.min_gbps", "nan"),
    ({"ib": {"min_rate_gbps": float("inf")}}, "ib.min_rate_gbps", "inf"),
    ({"health": {"xid_critical": [-3]}}, "health.xid_critical[0]", "-3"),
    ({"health": {"ib_counters": {"symbol_error": -1}}}, "health.ib_counters.symbol_error", "-1"),
    ({"health": {"nvme": {"min_spare_percent": 101}}}, "health.nvme.min_spare_percent", "101"),
    ({"storage": {"mounts": [{"path": "/", "min_free_gb": -1}]}}, "storage.mounts[0].min_free_gb", "-1"),
    ({"storage": {"mounts": {"path": "/"}}}, "storage.mounts", "path"),
    ({"firmware": {"nic": {"MT4129": "garbage"}}}, "firmware.nic.MT4129", "'garbage'"),
    ({"firmware": {"nic": ["MT4129"]}}, "firmware.nic", "MT4129"),
    ({"gpu": {"min_link_width": 0}}, "gpu.min_link_width", "0"),
    ({"guest": {"numa": [{"id": -1, "cpus": [0]}]}}, "guest.numa[0].id", "-1"),
    ({"guest": {"numa": [{"id": 0, "cpus": [-4]}]}}, "guest.numa[0].cpus[0]", "-4"),
])
def test_profile_range_and_type_named(patch, where, value):
    profile = reference_profile()
    for key, sub in patch.items():
        if isinstance(sub, dict) and isinstance(profile.get(key), dict):
            merged = dict(profile[key])
            merged.update(sub)
            profile[key] = merged
        else:
            profile[key] = sub
    with pytest.raises(_profile.ProfileError) as err:
        _profile.validate(profile, gate.CHECK_IDS)
    assert where in str(err.value) and value in str(err.value), str(err.value)


def test_reference_profiles_still_valid():
    folder = os.path.join(REPO, "inventories", "profiles")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as handle:
            _profile.validate(yaml.safe_load(handle), gate.CHECK_IDS)


# ---- 5. validate_node / node_facts: wrong options, a root that is no folder, binary files ----

@pytest.mark.parametrize("args, names", [
    ({"profile": "garbage"}, ["profile"]),
    ({"profile": ["a"]}, ["profile"]),
    ({"profile": {"gpu": {"count": "eight"}}}, ["gpu.count"]),
    ({"profile": {"name": "x"}, "checks": "nope.check"}, ["nope.check"]),
    ({"profile": {"name": "x"}, "checks": [{"a": 1}]}, ["checks"]),
    ({"profile": {"name": "x"}, "require": ["kernel.cmdlin"]}, ["kernel.cmdlin"]),
    ({"profile": {"name": "x"}, "command_timeout": "soon"}, ["command_timeout"]),
    ({"profile": {"name": "x"}, "command_timeout": -1}, ["command_timeout"]),
    ({"profile": {"name": "x"}, "probe_timeout": 0}, ["probe_timeout"]),
    ({"profile": {"name": "x"}, "commands": {"nvidia_smi_q": "nvidia-smi -q"}}, ["commands.nvidia_smi_q"]),
    ({"profile": {"name": "x"}, "commands": {"nvidia_smi_q": [1, None]}}, ["commands.nvidia_smi_q"]),
    ({"profile": {"name": "x"}, "packages": {"a": "b"}}, ["packages"]),
    ({"profile": {"name": "x"}, "services": {"a": 1}}, ["services"]),
    ({"profile": {"name": "x"}, "outputs": {"nvidia_smi_q": 5}}, ["outputs.nvidia_smi_q"]),
    ({"profile": {"name": "x"}, "probes": {"nccl": "yes"}}, ["probes.nccl"]),
    ({"profile": {"name": "x"}, "node": "../../etc/cron.d/x"}, ["node", "../../etc/cron.d/x"]),
    ({"profile": {"name": "x"}, "packages": {"nvidia-fabricmanager-550": ["550"]}}, ["packages.nvidia-fabricmanager-550"]),
    ({"profile": {"name": "x"}, "converged_stamp": "/tmp/x"}, ["desired_digest"]),
])
def test_validate_node_bad_options(run_module, unpacked_tree, clear_error, args, names):
    root = unpacked_tree("guest-mini")
    out = run_module("validate_node", dict(NOTHING, root=root, **args))
    clear_error(out, *names)


@pytest.mark.parametrize("module", ["node_facts", "validate_node"])
def test_root_that_is_a_file(run_module, clear_error, tmp_path, module):
    path = tmp_path / "root"
    path.write_text("x")
    args = {"root": str(path), "profile": {"name": "x"}} if module == "validate_node" else {"root": str(path)}
    clear_error(run_module(module, args), str(path))


@pytest.mark.parametrize("module", ["node_facts", "validate_node"])
def test_root_that_is_a_symlink_loop(run_module, clear_error, tmp_path, module):
    path = tmp_path / "root"
    os.symlink("root", str(path))
    args = {"root": str(path), "profile": {"name": "x"}} if module == "validate_node" else {"root": str(path)}
    clear_error(run_module(module, args), str(path))


def test_binary_cmdline_is_a_named_problem(run_module, unpacked_tree, succeeded):
    root = unpacked_tree("hgx-h100-ref")
    with open(os.path.join(root, "proc/cmdline"), "wb") as handle:
        handle.write(b"BOOT_IMAGE=/vmlinuz\x00intel_iommu=on\x00\xff\xfe iommu=pt\n")
    facts = run_module("node_facts", {"root": root})
    succeeded(facts)
    assert "proc/cmdline: not UTF-8 text" in _warned(facts), _warned(facts)
    gated = _gate_run(run_module, root, return_report=True)
    succeeded(gated)
    check = _verdicts(gated)["kernel.cmdline"]
    assert check["status"] == "error" and "proc/cmdline" in check["reason"], check


def test_nul_bytes_in_text_files_are_named(run_module, unpacked_tree, succeeded):
    root = unpacked_tree("hgx-h100-ref")
    for rel in ("proc/cmdline", "sys/class/infiniband/mlx5_0/fw_ver", "sys/devices/system/cpu/online",
                "proc/cpuinfo", "etc/os-release", "proc/self/mounts"):
        path = os.path.join(root, rel)
        if os.path.exists(path):
            with open(path, "ab") as handle:
                handle.write(b"\x00\x00junk\x00")
    facts = run_module("node_facts", {"root": root})
    succeeded(facts)
    gated = _gate_run(run_module, root, return_report=True)
    succeeded(gated)


# ---- 6. lookup profile ----

class _Loader:
    def get_basedir(self):
        return os.getcwd()


def _lookup(term, variables=None):
    lookup = profile_lookup.LookupModule(loader=_Loader())
    return lookup.run([term], variables=variables or {})


@pytest.mark.parametrize("content, names", [
    (b"- a\n- b\n", ["must be a mapping", "list"]),
    (b"", ["empty"]),
    (b"\x00\xff\xfe\x01binary", ["cannot read"]),
    (b"gpu: {count: -1}\n", ["gpu.count"]),
    (b"gpu: [\n", ["cannot read"]),
    (b"a: !!python/object:os.system x\n", ["cannot read"]),
])
def test_lookup_profile_bad_files(tmp_path, content, names):
    path = tmp_path / "bad.yml"
    path.write_bytes(content)
    with pytest.raises(AnsibleError) as err:
        _lookup(str(path))
    assert str(path) in str(err.value), str(err.value)
    for name in names:
        assert name in str(err.value), str(err.value)


@pytest.mark.parametrize("term", ["no-such-profile", "../x", "../../../../etc/passwd", "hgx-h100/../../x",
                                  "a\x00b", 42, None, ["hgx-h100"], "  "])
def test_lookup_profile_bad_terms(tmp_path, term):
    with pytest.raises(AnsibleError) as err:
        _lookup(term, {"inventory_dir": str(tmp_path), "playbook_dir": str(tmp_path)})
    assert repr(term) in str(err.value) or str(term) in str(err.value), str(err.value)


def test_lookup_profile_fifo(tmp_path):
    path = tmp_path / "fifo.yml"
    os.mkfifo(str(path))
    with pytest.raises(AnsibleError) as err:
        _lookup(str(path))
    assert str(path) in str(err.value)


def test_lookup_profile_shipped_name_still_loads():
    assert _lookup("hgx-h100")[0]["name"] == "hgx-h100"


# ---- more of our own: garbage in single files ----

@pytest.mark.parametrize("rel, content, check_id", [
    ("sys/bus/pci/devices/0000:18:00.0/vendor", b"nvidia\n", "gpu.count"),
    ("sys/bus/pci/devices/0000:18:00.0/class", b"\xff\xfe\n", "gpu.count"),
    ("sys/kernel/mm/transparent_hugepage/enabled", b"always madvise never\n", "memory.thp"),
    ("proc/sys/kernel/numa_balancing", b"yes\n", "memory.numa_balancing"),
    ("sys/class/infiniband/mlx5_0/ports/1/state", b"\x00\x00\n", "ib.ports"),
    ("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", b"-\n", "ib.counters"),
    ("etc/os-release", b"\xff" * 64, "os.release"),
])
def test_garbage_file_is_an_error_naming_it(run_module, unpacked_tree, succeeded, rel, content, check_id):
    root = unpacked_tree("hgx-h100-ref")
    with open(os.path.join(root, rel), "wb") as handle:
        handle.write(content)
    gated = _gate_run(run_module, root, return_report=True)
    succeeded(gated)
    check = _verdicts(gated)[check_id]
    assert check["status"] == "error", (check["status"], check["reason"])
    assert rel in check["reason"], check["reason"]


def test_hostname_with_a_slash_never_names_a_report_file(run_module, unpacked_tree, clear_error, tmp_path):
    root = unpacked_tree("guest-mini")
    with open(os.path.join(root, "etc/hostname"), "w") as handle:
        handle.write("../../escape\n")
    out = run_module("validate_node", dict(NOTHING, root=root, profile={"name": "x"}, report_dir=str(tmp_path / "r")))
    clear_error(out, "etc/hostname", "../../escape")
    assert not os.path.exists(str(tmp_path / "r"))


@pytest.mark.parametrize("stamp_kind", ["folder", "fifo", "garbage"])
def test_converged_stamp_that_is_no_stamp(run_module, unpacked_tree, tmp_path, stamp_kind):
    root = unpacked_tree("guest-mini")
    path = tmp_path / "stamp"
    if stamp_kind == "folder":
        path.mkdir()
    elif stamp_kind == "fifo":
        os.mkfifo(str(path))
    else:
        path.write_bytes(b"\x00\xffnot json")
    out = run_module("validate_node", dict(NOTHING, root=root, profile={"name": "x"}, converged_stamp=str(path),
                                           desired_digest="abc"))
    assert not out["_traceback"], out["_stderr"][-2000:]
    # not converged (the stamp cannot be read), or a clear error naming it
    assert out.get("converged") is False or (out.failed and str(path) in out.msg), dict(out)


def test_unicode_digit_names_in_sysfs_folders(unpacked_tree):
    # "²".isdigit() is true but int("²") raises: a folder entry named so was a traceback
    root = unpacked_tree("hgx-h100-roce")
    base = os.path.join(root, "sys/class/infiniband/mlx5_0/ports")
    os.mkdir(os.path.join(base, "\u00b2"))
    gids = os.path.join(base, "1", "gids")
    if os.path.isdir(gids):
        with open(os.path.join(gids, "\u00b9"), "w") as handle:
            handle.write("fe80:0000:0000:0000:0000:0000:0000:0001\n")
    os.mkdir(os.path.join(root, "sys/class/infiniband/mlx5_\u00b2"))
    facts, _warnings = collect(root)
    assert [p["port"] for p in [n for n in facts["nics"] if n["name"] == "mlx5_0"][0]["ports"]] == [1]
    assert "mlx5_\u00b2" in [n["name"] for n in facts["nics"]]


@pytest.mark.parametrize("name, text", [
    ("dcgm_diag", '{"DCGM GPU Diagnostic": {"test_categories": "x"}}'),
    ("dcgm_diag", '{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"results": [{"warnings": "w"}]}]}]}}'),
    ("nvidia_smi_q", "GPU 00000000:18:00.0\n    Fabric\n        Status : Success\n"
                     "GPU 00000000:29:00.0\n    Fabric\n        State : Completed\n"),
])
def test_garbage_outputs_are_errors_or_verdicts_never_internal_errors(unpacked_tree, name, text):
    # found by fuzzing every output with garbage and mutated real captures (the gate's catch-all
    # turned these into "internal error in check ...")
    facts, _warnings = collect(unpacked_tree("hgx-h100-ref"))
    raw = reference_profile()
    raw["probes"] = {"dcgm": {"enabled": True}}
    profile = _profile.validate(raw, gate.CHECK_IDS)
    report = gate.evaluate(gate.Inputs(facts, profile, packages={}, services={}, outputs={name: text}), node="n")
    internal = [(c["id"], c["reason"]) for c in report["checks"] if "internal error" in c["reason"]]
    assert internal == []


@pytest.mark.parametrize("patch", [{"nvidia": {"driver_version": "="}}, {"ofed": {"version": "a b"}}])
def test_profile_version_of_garbage_is_an_error_of_the_check_not_internal(unpacked_tree, patch):
    # found by fuzzing profiles: the profile loads (a string), the pins derived from it do not
    facts, _warnings = collect(unpacked_tree("hgx-h100-ref"))
    raw = reference_profile()
    for key, value in patch.items():
        raw[key] = dict(raw[key], **value)
    profile = _profile.validate(raw, gate.CHECK_IDS)
    report = gate.evaluate(gate.Inputs(facts, profile, packages={}, services={}, outputs={}), node="n")
    held = [c for c in report["checks"] if c["id"] == "packages.held"][0]
    assert held["status"] == "error" and held["reason"].startswith("profile: "), held
    assert list(patch.values())[0].popitem()[1] in held["reason"]
