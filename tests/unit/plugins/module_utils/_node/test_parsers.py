"""Pure parsers: hand-written samples in the kernel's formats, and garbage that must raise ValueError."""
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpufleet.provision.plugins.module_utils._node import parsers as P


def test_cpulist_ranges_and_singles():
    assert P.parse_cpulist("0-2,104-106") == [0, 1, 2, 104, 105, 106]
    assert P.parse_cpulist("5\n") == [5]
    assert P.parse_cpulist("") == []
    assert P.format_cpulist([0, 1, 2, 5, 104, 105]) == "0-2,5,104-105"


@pytest.mark.parametrize("bad", ["a-b", "3-1", "1,,2", "0-99999999", "8192", "0-8192"])
def test_cpulist_garbage(bad):
    with pytest.raises(ValueError):
        P.parse_cpulist(bad)


def test_cpulist_total_is_capped_at_the_kernels_8192_cpus():
    # The kernel's NR_CPUS tops out at 8192: CPUs 0-8191 is the largest list it can write.
    assert len(P.parse_cpulist("0-8191")) == 8192
    assert len(P.parse_cpulist("0-4095,4096-8191")) == 8192
    with pytest.raises(ValueError, match="more than 8192 CPUs"):
        P.parse_cpulist("0-4095,0-4095,0-1")
    # 1 KiB of ranges that each stay under the cap: rejected after the first few ranges, before
    # anything is built (this input ran node_facts past 5 minutes and 10 GB).
    text = ",".join(["0-8000"] * 150)[:1024].rstrip(",-0123456789") or "0-8000"
    with pytest.raises(ValueError, match="more than 8192 CPUs"):
        P.parse_cpulist(",".join(["0-8000"] * 150))
    assert len(text) <= 1024


def test_cpu_online_is_never_empty():
    assert P.parse_cpu_online("0-3\n") == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="no online CPU"):
        P.parse_cpu_online("\n")


def test_node_meminfo():
    text = "Node 0 MemTotal:       121634816 kB\nNode 0 MemFree:        117000000 kB\nNode 0 HugePages_Total:     0\n"
    assert P.parse_node_meminfo(text) == {"MemTotal": 121634816, "MemFree": 117000000, "HugePages_Total": 0}
    with pytest.raises(ValueError):
        P.parse_node_meminfo("Node 0 MemFree: 12 kB")


def test_cpuinfo_first_block():
    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
            "flags\t\t: fpu vme vmx ht\n\nprocessor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n")
    info = P.parse_cpuinfo(text)
    assert info["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert "vmx" in info["flags"] and "svm" not in info["flags"]


def test_ib_state_rate():
    assert P.parse_ib_state("4: ACTIVE") == (4, "ACTIVE")
    assert P.parse_ib_state("5: LinkUp\n") == (5, "LinkUp")
    assert P.parse_ib_rate("400 Gb/sec (4X NDR)") == 400.0
    assert P.parse_ib_rate("2.5 Gb/sec (1X SDR)") == 2.5
    with pytest.raises(ValueError):
        P.parse_ib_state("ACTIVE")
    with pytest.raises(ValueError):
        P.parse_ib_rate("fast")


def test_bracketed_choice():
    assert P.parse_bracketed("always madvise [never]") == "never"
    assert P.parse_bracketed("[always] defer defer+madvise madvise never") == "always"
    with pytest.raises(ValueError):
        P.parse_bracketed("always madvise never")


def test_cmdline_keeps_order_duplicates_and_quotes():
    raw = 'BOOT_IMAGE=/vmlinuz root=UUID=ab-cd ro hugepagesz=1G hugepages=16 hugepages=16 acpi_osi="Windows 2020" quiet -- single'
    params = P.parse_cmdline(raw)
    assert [p["key"] for p in params] == ["BOOT_IMAGE", "root", "ro", "hugepagesz", "hugepages", "hugepages", "acpi_osi", "quiet"]
    assert params[1] == {"key": "root", "value": "UUID=ab-cd"}
    assert params[2] == {"key": "ro", "value": None}
    assert params[6]["value"] == "Windows 2020"


def test_os_release():
    text = 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n# comment\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n'
    assert P.parse_os_release(text) == {"NAME": "Ubuntu", "VERSION_ID": "22.04", "ID": "ubuntu", "PRETTY_NAME": "Ubuntu 22.04.4 LTS"}


def test_mounts_unescape():
    text = "/dev/md0 /raid ext4 rw,relatime 0 0\n/dev/sdb1 /mnt/my\\040disk vfat rw 0 0\nshort line\n"
    mounts = P.parse_mounts(text)
    assert mounts[0] == {"device": "/dev/md0", "mountpoint": "/raid", "fstype": "ext4", "options": ["rw", "relatime"]}
    assert mounts[1]["mountpoint"] == "/mnt/my disk"
    assert len(mounts) == 2


def test_nvidia_versions():
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\nGCC version: 12"
    open_module = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (dvs-builder@U16-I3-B03-4-3)"
    assert P.parse_nvidia_proc_version(proprietary) == "550.90.07"
    assert P.parse_nvidia_proc_version(open_module) == "560.35.03"
    assert P.parse_version("550.90.07\n") == "550.90.07"
    with pytest.raises(ValueError):
        P.parse_version("garbage")


def test_colon_fields_and_ids():
    info = P.parse_colon_fields("Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t 0000:18:00.0\n")
    assert info == {"Model": "NVIDIA H100 80GB HBM3", "Bus Location": "0000:18:00.0"}
    assert P.parse_hex_id("0x10DE\n") == "0x10de"
    assert P.parse_link_width("x16") == 16


def test_natural_key_orders_numbers_as_numbers():
    names = ["mlx5_10", "mlx5_2", "mlx5_ib1", "mlx5_an0", "gpu10", "gpu9", ""]
    assert sorted(names, key=P.natural_key) == ["", "gpu9", "gpu10", "mlx5_2", "mlx5_10", "mlx5_an0", "mlx5_ib1"]


PARSERS = [P.parse_cpulist, P.parse_cpu_online, P.parse_int, P.parse_node_meminfo, P.parse_meminfo, P.parse_distance,
           P.parse_cpuinfo, P.parse_ib_state, P.parse_ib_rate, P.parse_bracketed, P.parse_cmdline,
           P.parse_os_release, P.parse_mounts, P.parse_nvidia_proc_version, P.parse_version,
           P.parse_colon_fields, P.parse_hex_id, P.parse_link_width]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PARSERS), st.text())
def test_any_text_gives_data_or_valueerror(parser, text):
    """Arbitrary content: a parser returns data or raises ValueError (which the reader records), nothing else."""
    try:
        parser(text)
    except ValueError:
        pass


def test_digits_are_ascii_digits_only():
    # Python's \d and isdecimal() take other scripts' digits; the kernel, Slurm and an IP stack do not
    assert P.ipv4_int("1.2.3.\u0664") is None and P.ipv4_int("1.2.3.\u00b2") is None
    assert P.ipv4_int("10.0.0.1") == 167772161
    assert P.hostlist(["gpu1", "gpu2", "gpu\u0663"]) == "gpu[1-2],gpu\u0663"
