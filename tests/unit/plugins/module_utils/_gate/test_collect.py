"""The gate's node-side collection (module_utils/_gate/collect.py): parsers on hand-written tool
output, and commands run lazily, once, only for the checks evaluated."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.profile import ProfileError


class Runner:
    """A recording stand-in for the command runner: argv -> (rc, stdout, stderr)."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, argv, timeout=None):
        self.calls.append(list(argv) if timeout is None else (list(argv), timeout))
        return self.answers.get(argv[0], (127, "", "%s: command not found" % argv[0]))


def test_dpkg_query_keeps_installed_packages_only():
    text = ("nvidia-driver-550-server\t550.90.07-0ubuntu1\tamd64\thi \n"
            "linux-image-6.8.0-45-generic\t6.8.0-45.45\tamd64\tii \n"
            "nvidia-driver-535-server\t535.183.01-0ubuntu1\tamd64\trc \n"
            "half\t1.0\tamd64\tiU \n"
            "libc6\t2.36-9\tamd64\tii \n"
            "libc6\t2.36-9\ti386\tii \n")
    assert collect.parse_dpkg_query(text) == {
        "nvidia-driver-550-server": [{"name": "nvidia-driver-550-server", "version": "550.90.07-0ubuntu1", "arch": "amd64", "source": "apt"}],
        "linux-image-6.8.0-45-generic": [{"name": "linux-image-6.8.0-45-generic", "version": "6.8.0-45.45", "arch": "amd64", "source": "apt"}],
        "libc6": [{"name": "libc6", "version": "2.36-9", "arch": "amd64", "source": "apt"},
                  {"name": "libc6", "version": "2.36-9", "arch": "i386", "source": "apt"}],
    }


def test_rpm_query_splits_epoch_version_release():
    text = "nvidia-fabric-manager\t3\t550.90.07\t1\tx86_64\nkernel\t0\t5.14.0\t427.13.1.el9_4\tx86_64\n"
    assert collect.parse_rpm_query(text) == {
        "nvidia-fabric-manager": [{"name": "nvidia-fabric-manager", "epoch": 3, "version": "550.90.07", "release": "1",
                                   "arch": "x86_64", "source": "rpm"}],
        "kernel": [{"name": "kernel", "epoch": None, "version": "5.14.0", "release": "427.13.1.el9_4",
                    "arch": "x86_64", "source": "rpm"}],
    }


def test_systemctl_show_records_in_service_facts_form():
    text = ("Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\nUnitFileState=enabled\n\n"
            "Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n\n"
            "Id=nope.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n")
    assert collect.parse_systemctl_show(text) == {
        "nvidia-fabricmanager.service": {"name": "nvidia-fabricmanager.service", "state": "stopped", "status": "failed", "source": "systemd"},
        "nvidia-persistenced.service": {"name": "nvidia-persistenced.service", "state": "running", "status": "enabled", "source": "systemd"},
    }


def test_outputs_run_on_first_read_once_and_keep_the_cause():
    run = Runner({"nvidia-smi": (0, "Attached GPUs : 8\n", ""), "ofed_info": (124, "", ""), "mlxconfig": (0, "ATS", "")})
    outputs = collect.Outputs(run, given={"kernel_log": "recorded"}, timeout=7)
    assert run.calls == []                                   # nothing before a check reads
    assert outputs.get("nvidia_smi_q") == "Attached GPUs : 8\n" and outputs["nvidia_smi_q"]
    assert outputs.get("kernel_log") == "recorded"           # recorded outputs are not collected
    assert outputs.get("ofed_info") is None and "ofed_info" not in outputs
    assert outputs.errors["ofed_info"] == "ofed_info -s: timed out after 7 s"
    assert outputs.get("modinfo_mlx5_core") is None
    assert outputs.errors["modinfo_mlx5_core"].startswith("modinfo -F vermagic mlx5_core: command absent or not executable")
    assert outputs.get("mlxconfig_0000:17:00.0") == "ATS"
    assert outputs.get("mlxconfig_; rm -rf") is None         # not a device name: no command
    assert outputs.get("no_such_output") is None
    assert run.calls == [["nvidia-smi", "-q"], ["ofed_info", "-s"], ["modinfo", "-F", "vermagic", "mlx5_core"],
                         ["mlxconfig", "-e", "-d", "0000:17:00.0", "q", "ATS_ENABLED"]]
    assert outputs.ran == {"nvidia_smi_q": "ok", "ofed_info": "ofed_info -s: timed out after 7 s",
                           "modinfo_mlx5_core": outputs.errors["modinfo_mlx5_core"], "mlxconfig_0000:17:00.0": "ok"}


def test_probes_run_under_their_own_timeout_and_are_named_by_their_label():
    run = Runner({"python3": (3, "", "no data: nccl-tests (all_reduce_perf) is not on this node\n"), "h2d": (124, "", "")})
    outputs = collect.Outputs(run, timeout=60, probes={
        "nccl_debug": (["python3", "/tmp/m/gpufleet_probe.py", "nccl"], 1800, "gpufleet_probe.py nccl"),
        "h2d_bandwidth": (["h2d", "--all"], 30, "h2d --all")})
    assert outputs.get("nccl_debug") is None and outputs.get("h2d_bandwidth") is None
    assert run.calls == [(["python3", "/tmp/m/gpufleet_probe.py", "nccl"], 1800), (["h2d", "--all"], 30)]
    assert outputs.errors == {"nccl_debug": "gpufleet_probe.py nccl: rc=3, no data: nccl-tests (all_reduce_perf) is not on this node",
                              "h2d_bandwidth": "h2d --all: timed out after 30 s"}


def test_an_empty_table_or_a_given_cause_runs_nothing():
    run = Runner({})
    outputs = collect.Outputs(run, commands={}, errors={"nvidia_smi_q": "not run (recorded capture)"})
    assert outputs.get("nvidia_smi_q") is None and outputs.get("nvme_smart_nvme0") is None
    assert run.calls == [] and outputs.errors == {"nvidia_smi_q": "not run (recorded capture)"}


def test_packages_and_holds_from_one_dpkg_query_else_rpm_else_a_cause():
    dpkg = Runner({"dpkg-query": (0, "dpkg\t1.21.22\tamd64\tii \nnvidia-driver-550-server\t550.90.07-0ubuntu1\tamd64\thi \n"
                                     "old-held\t1.0\tamd64\thn \n", "")})
    database = collect.PackageDB(dpkg, lambda c: c == "dpkg-query")
    assert database.packages() == ({
        "dpkg": [{"name": "dpkg", "version": "1.21.22", "arch": "amd64", "source": "apt"}],
        "nvidia-driver-550-server": [{"name": "nvidia-driver-550-server", "version": "550.90.07-0ubuntu1", "arch": "amd64",
                                      "source": "apt"}]}, None)
    # apt-mark showhold lists every package selected for hold, installed or not
    assert database.holds() == ("nvidia-driver-550-server\nold-held\n", None)
    assert len(dpkg.calls) == 1                                    # one query for both
    outputs = collect.Outputs(dpkg, builtin={"apt_mark_showhold": (["apt-mark", "showhold"], database.holds)})
    assert outputs.get("apt_mark_showhold") == "nvidia-driver-550-server\nold-held\n" and len(dpkg.calls) == 1
    other = collect.Outputs(dpkg, commands={"apt_mark_showhold": ["my-holds"]},
                            builtin={"apt_mark_showhold": (["apt-mark", "showhold"], database.holds)})
    assert other.get("apt_mark_showhold") is None and dpkg.calls[-1] == ["my-holds"]   # a command of its own runs
    rpm = Runner({"rpm": (1, "", "error: rpmdb open failed")})
    assert collect.PackageDB(rpm, lambda c: c == "rpm").packages() == (None, "rpm -qa: rc=1, error: rpmdb open failed")
    assert collect.PackageDB(Runner({}), lambda c: False).packages() == (
        None, "no package database found (neither dpkg-query nor rpm on the node)")


def test_holds_read_like_apt_mark_on_this_machine():
    """The real dpkg status of the machine the tests run on: the same list apt-mark showhold prints."""
    import shutil
    import subprocess
    if not (shutil.which("dpkg-query") and shutil.which("apt-mark")):
        import pytest
        pytest.skip("no dpkg/apt on this machine")

    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    holds, cause = collect.PackageDB(run, shutil.which).holds()
    assert cause is None
    assert holds.split() == sorted(run(["apt-mark", "showhold"])[1].split())


def test_services_ask_systemd_per_unit_once():
    show = "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n"
    run = Runner({"systemctl": (0, show, "")})
    services = collect.Services(run, systemd=True)
    assert services.get("nvidia-fabricmanager")["state"] == "running"
    assert services["nvidia-fabricmanager.service"]["status"] == "enabled"
    assert len(run.calls) == 1 and run.calls[0][-1] == "nvidia-fabricmanager.service"
    broken = collect.Services(Runner({"systemctl": (1, "", "Failed to connect to bus")}), systemd=True)
    assert broken.get("nvidia-fabricmanager") is None
    assert broken.cause == "systemctl show nvidia-fabricmanager.service: rc=1, Failed to connect to bus"


def test_a_probe_script_that_cannot_be_written_is_an_error_naming_the_path(tmp_path):
    missing = tmp_path / "gone"
    with pytest.raises(ProfileError, match="probe script: %s/gpufleet_probe.py: cannot write " % missing):
        collect.write_probe_script("print(1)\n", str(missing))
    assert collect.write_probe_script("", str(tmp_path)) is None
    path = collect.write_probe_script("print(1)\n", str(tmp_path))
    assert open(path).read() == "print(1)\n"
