"""tuning through Ansible on a temporary root and hardware root: check mode, run, read back, second run."""
import os


def _hw(tmp_path, thp="[always] madvise never", numa="1", governors=("performance", "powersave"), pages="64"):
    hw = tmp_path / "hw"
    (hw / "sys/kernel/mm/transparent_hugepage").mkdir(parents=True)
    (hw / "sys/kernel/mm/transparent_hugepage/enabled").write_text(thp + "\n")
    (hw / "proc/sys/kernel").mkdir(parents=True)
    (hw / "proc/sys/kernel/numa_balancing").write_text(numa + "\n")
    (hw / "sys/kernel/mm/hugepages/hugepages-1048576kB").mkdir(parents=True)
    (hw / "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages").write_text(pages + "\n")
    for n, gov in enumerate(governors):
        d = hw / ("sys/devices/system/cpu/cpu%d/cpufreq" % n)
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(gov + "\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
    root = tmp_path / "root"
    root.mkdir()
    return root, hw


def _args(root, hw, **kw):
    args = {"hugepages": {"1048576": 128}, "thp": "never", "numa_balancing": 0, "governor": "performance",
            "root": str(root), "hardware_root": str(hw)}
    args.update(kw)
    return args


def test_check_then_run_then_nothing_left(adhoc, tmp_path):
    root, hw = _hw(tmp_path)
    rc, checked = adhoc("tuning", _args(root, hw), check=True)
    assert rc == 0 and checked["changed"] is True
    assert checked["runtime_changes"] == ["kernel.numa_balancing: 1 -> 0", "transparent_hugepage: always -> never",
                                          "hugepages 1048576 kB: 64 -> 128", "governor of 1 CPUs (1): powersave -> performance"]
    assert checked["files"] == ["etc/sysctl.d/90-gpufleet-tuning.conf", "etc/systemd/system/gpufleet-tuning.service",
                                "usr/local/sbin/gpufleet-tuning"]
    assert os.listdir(root) == [] and (hw / "proc/sys/kernel/numa_balancing").read_text() == "1\n"

    rc, done = adhoc("tuning", _args(root, hw))
    assert rc == 0 and done["changed"] is True and done["runtime_changes"] == checked["runtime_changes"]
    assert (root / "etc/sysctl.d/90-gpufleet-tuning.conf").read_text().endswith("kernel.numa_balancing = 0\n")
    assert (hw / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").read_text() == "performance\n"
    # a plain file is not sysfs: "never" written is not read back as "[never]": the boot must do it
    assert done["reboot_reasons"] == [
        "transparent_hugepage reads 'never' (restored) at run time after writing never: the boot-time setting needs the reboot"]
    assert (hw / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "[always] madvise never\n"
    assert os.access(root / "usr/local/sbin/gpufleet-tuning", os.X_OK)

    (hw / "sys/kernel/mm/transparent_hugepage/enabled").write_text("always madvise [never]\n")
    rc, again = adhoc("tuning", _args(root, hw))
    assert rc == 0 and again["changed"] is False and again["reboot_required"] is False and again["files"] == []


def test_governor_the_cpu_does_not_offer_fails_naming_the_file(adhoc, tmp_path):
    root, hw = _hw(tmp_path)
    rc, result = adhoc("tuning", _args(root, hw, governor="ondemand"))
    assert rc != 0 and "cpu0/cpufreq/scaling_governor: governor ondemand not offered (available: performance powersave)" in result["msg"]
    assert os.listdir(root) == []


def test_unreadable_setting_is_an_error_naming_the_path(adhoc, tmp_path):
    root, hw = _hw(tmp_path, numa="x")
    rc, result = adhoc("tuning", _args(root, hw))
    assert rc != 0 and "proc/sys/kernel/numa_balancing: cannot parse" in result["msg"]
