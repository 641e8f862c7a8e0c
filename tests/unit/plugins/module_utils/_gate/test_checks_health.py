"""Output parsers of the gate and the verdicts of issue 13, on outputs written by hand from each
tool's documented format (where tests/fixtures/realdata has no capture of that tool). Expected values
are read off the text by hand."""
import copy
import importlib.util
import json
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers import bandwidth, dcgm, kernel_log, nccl
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers import nvidia_smi, nvme, ofed
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers import packages as pkgparse

_SPEC = importlib.util.spec_from_file_location("validate_test_checks_h", os.path.join(os.path.dirname(__file__), "test_checks.py"))
_SAMPLE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SAMPLE)


def _check(ctx, check_id):
    return next(c for c in gate.evaluate(ctx)["checks"] if c["id"] == check_id)


# nvbandwidth v0.8 "run everything": several cases share the CPU(row) -> GPU(column) title; only
# host_to_device_memcpy_ce is the H2D copy-engine figure (the layout of a full run, values ours).
NVBANDWIDTH_FULL = """nvbandwidth Version: v0.8
Built from Git version: v0.8

CUDA Runtime Version: 12080
CUDA Driver Version: 12080
Driver Version: 550.90.07

Device 0: NVIDIA H100 80GB HBM3 (00000000:18:00)
Device 1: NVIDIA H100 80GB HBM3 (00000000:29:00)

Running host_to_device_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     55.37     55.36

SUM host_to_device_memcpy_ce 110.73

Running device_to_host_memcpy_ce.
memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)
           0         1
 0     55.20     55.21

SUM device_to_host_memcpy_ce 110.41

Waived:
Running host_to_all_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     27.61     27.60

SUM host_to_all_memcpy_ce 55.21

Running device_to_device_memcpy_read_ce.
memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0       N/A    372.51
 1    370.02       N/A

SUM device_to_device_memcpy_read_ce 742.53

Running host_to_device_memcpy_sm.
memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     29.95     29.90

SUM host_to_device_memcpy_sm 59.85

NOTE: The reported results may not reflect the full capabilities of the platform.
"""


def test_h2d_reads_only_the_host_to_device_ce_case_of_a_full_run():
    # Averaging every CPU(row) -> GPU(column) matrix read 55 GB/s as 37 (issue 13).
    assert bandwidth.parse_h2d(NVBANDWIDTH_FULL) == {"0": [55.37], "1": [55.36]}
    cases = bandwidth.parse_nvbandwidth(NVBANDWIDTH_FULL)
    assert sorted(cases) == ["device_to_device_memcpy_read_ce", "device_to_host_memcpy_ce", "host_to_all_memcpy_ce",
                             "host_to_device_memcpy_ce", "host_to_device_memcpy_sm"]
    assert cases["device_to_device_memcpy_read_ce"] == [[[None, 372.51], [370.02, None]]]
    ctx = _SAMPLE.sample_inputs()
    ctx.outputs["h2d_bandwidth"] = NVBANDWIDTH_FULL
    ctx.facts["gpus"] = ctx.facts["gpus"][:2]
    check = _check(ctx, "gpu.h2d_bandwidth")
    assert check["status"] == "pass" and check["observed"]["min"] == 55.36


def test_h2d_probe_lines_several_runs_per_gpu():
    text = "GPU 0000:18:00.0: 48.91 GB/s\nGPU 0000:18:00.0: 48.87 GB/s\nGPU 0000:29:00.0: 29.40 GB/s\n"
    assert bandwidth.parse_h2d(text) == {"0000:18:00.0": [48.91, 48.87], "0000:29:00.0": [29.4]}
    with pytest.raises(ValueError, match="host_to_device_memcpy_ce"):
        bandwidth.parse_h2d(NVBANDWIDTH_FULL.replace("Running host_to_device_memcpy_ce.", "Running host_to_device_memcpy_xx."))


def test_p2p_pairs_from_the_device_to_device_case():
    assert bandwidth.parse_p2p(NVBANDWIDTH_FULL) == {"case": "device_to_device_memcpy_read_ce", "pairs": {"0-1": 372.51, "1-0": 370.02}}
    with pytest.raises(ValueError):
        bandwidth.parse_p2p(bandwidth.parse_h2d.__doc__)


MLX_NEXT_BOOT_ONLY = """
Device #1:
----------

Device type:        ConnectX7
Name:               MCX75310AAS-NEA_Ax
Description:        NVIDIA ConnectX-7 HHHL adapter card; 400Gb/s NDR IB; single-port OSFP; PCIe 5.0 x16
Device:             0000:19:00.0

Configurations:                                      Next Boot
        ATS_ENABLED                                 True(1)
"""
MLX_E = """
Device #1:
----------

Device type:        ConnectX7
Name:               MCX75310AAS-NEA_Ax
Device:             0000:19:00.0

Configurations:                                      Default         Current         Next Boot
*       ATS_ENABLED                                 False(0)        False(0)        True(1)
"""


def test_mlxconfig_current_column_and_pending_change():
    assert ofed.parse_mlxconfig(MLX_NEXT_BOOT_ONLY, "ATS_ENABLED") == {"current": None, "next_boot": True}
    assert ofed.parse_mlxconfig(MLX_E, "ATS_ENABLED") == {"current": False, "next_boot": True}
    profile = dict(_SAMPLE.PROFILE, nic={"rails": 8, "affinity": ["PIX"], "ats": True})
    ctx = _SAMPLE.sample_inputs(profile=profile)
    pci = ctx.facts["nics"][0]["pci"]
    ctx.outputs["mlxconfig_%s" % pci] = MLX_NEXT_BOOT_ONLY
    check = _check(ctx, "nic.ats")
    # Without -e: only the value of the next boot, so "ATS on" is not shown to be live: no data.
    assert check["status"] == "skip" and "query with mlxconfig -e" in check["reason"]
    ctx.outputs["mlxconfig_%s" % pci] = MLX_E
    check = _check(ctx, "nic.ats")
    assert check["status"] == "fail"
    assert check["reason"] == "mlx5_0 (%s) ATS_ENABLED False (Next Boot True: pending until mlxfwreset or a reboot)" % pci


NCCL_SHARP = """gpu001:9:9 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu001:9:27 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so
gpu001:9:27 [0] NCCL INFO P2P plugin IBext_v8
gpu001:9:27 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB \
[4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; OOB ibp26s0:10.1.0.1<0>
gpu001:9:27 [0] NCCL INFO Using network IBext_v8
gpu001:9:27 [0] NCCL INFO NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0'
gpu001:9:41 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext_v8/0/GDRDMA
"""


def test_nccl_sharp_plugin_is_ib_and_gdr_disabled_fails():
    parsed = nccl.parse_nccl_debug(NCCL_SHARP)
    assert parsed["transports"] == {"IB"} and len(parsed["hcas"]) == 8 and parsed["gdr"] == {"mlx5_0": True}
    ctx = _SAMPLE.sample_inputs()
    ctx.outputs["nccl_debug"] = NCCL_SHARP
    assert _check(ctx, "transport.nccl")["status"] == "pass"
    ctx.outputs["nccl_debug"] = NCCL_SHARP.replace("GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0'",
                                                   "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'")
    check = _check(ctx, "transport.nccl")
    assert check["status"] == "fail" and check["reason"] == "GPU Direct RDMA disabled for mlx5_0"
    # Over sockets GDR is not a question; the transport is the failure.
    ctx.outputs["nccl_debug"] = _SAMPLE.NCCL_SOCKET
    assert _check(ctx, "transport.nccl")["reason"].startswith("NCCL transports Socket")


# nccl-tests 2.13 all_reduce_perf under mpirun (rank prefix "0: "), and an old version without
# the root column.
ALL_REDUCE = """ 0: #                                                              out-of-place                       in-place
 0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
 0: #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
 0:   8589934592    2147483648     float     sum      -1    37466  229.27  401.22      0    37425  229.53  401.67      0
 0:  17179869184    4294967296     float     sum      -1    74321  231.15  404.52      0    74298  231.23  404.65      0
 0: # Out of bounds values : 0 OK
 0: # Avg bus bandwidth    : 402.99
"""
ALL_REDUCE_OLD = """#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  1073741824     268435456   float     sum    11774   91.20  170.99  2e-07    11774   91.19  170.99  2e-07
# Avg bus bandwidth    : 170.99
"""


def test_nccl_tests_busbw_of_the_largest_size():
    assert bandwidth.parse_nccl_tests(ALL_REDUCE) == {"busbw_gbps": 404.52, "size": 17179869184, "avg_busbw_gbps": 402.99, "wrong": 0}
    assert bandwidth.parse_nccl_tests(ALL_REDUCE_OLD)["busbw_gbps"] == 170.99
    profile = copy.deepcopy(_SAMPLE.PROFILE)
    profile["probes"]["nccl"]["min_busbw_gbps"] = 460.0
    ctx = _SAMPLE.sample_inputs(profile=profile)
    ctx.outputs["nccl_debug"] = _SAMPLE.NCCL_IB + ALL_REDUCE
    check = _check(ctx, "nccl.allreduce_bandwidth")
    assert check["status"] == "fail"
    assert check["reason"] == "all-reduce bus bandwidth 404.5 GB/s < 460.0 (at 17179869184 bytes)"
    # No threshold in the profile: not asked, even with the probe enabled (never "required").
    assert _check(_SAMPLE.sample_inputs(), "nccl.allreduce_bandwidth")["status"] == "skip"


IB_WRITE_BW = """# gdr mlx5_0 cuda 0 (0000:18:00.0)
 #bytes  #iterations BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8388608    5000             392.52             392.47               0.005848
# gdr mlx5_3 cuda 3 (0000:4b:00.0)
 Couldn't allocate MR
 Unable to use CUDA: --use_cuda is not supported by this build of perftest
"""


def test_ib_write_bw_per_rail_and_a_rail_without_result():
    assert bandwidth.parse_ib_write_bw(IB_WRITE_BW) == {"mlx5_0 cuda 0": 392.47, "mlx5_3 cuda 3": None}
    with pytest.raises(ValueError, match="--report_gbits"):
        bandwidth.parse_ib_write_bw(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n")


def test_xids_with_their_meaning_and_only_the_critical_ones_count():
    log = ("[  912.345678] NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
           "Nov 30 10:00:01 gpu001 kernel: NVRM: Xid (PCI:0000:3B:00): 13, pid=4242, name=python, Graphics Exception: ESR 0x50\n"
           "Nov 30 10:00:02 gpu001 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    assert [(x["pci"], x["xid"]) for x in kernel_log.parse_xids(log)] == [("0000:18:00", 79), ("0000:3b:00", 13), ("0000:18:00", 79)]
    profile = dict(_SAMPLE.PROFILE, health={"xid_critical": [48, 79]})
    ctx = _SAMPLE.sample_inputs(profile=profile)
    ctx.outputs["kernel_log"] = log
    check = _check(ctx, "gpu.xid")
    assert check["status"] == "fail" and check["reason"] == "GPU 0000:18:00 XID 79 (GPU has fallen off the bus) x2"
    ctx.outputs["kernel_log"] = log.replace(": 79,", ": 31,")
    assert _check(ctx, "gpu.xid")["status"] == "pass"
    del ctx.outputs["kernel_log"]
    assert _check(ctx, "gpu.xid")["reason"].startswith("no data: journalctl -k -b 0 output not collected")


NVLINK = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa)
\t Link 0: 26.562 GB/s
\t Link 1: <inactive>
\t Link 2: 26.562 GB/s
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-0d3e5d0b-8c55-2d4f-2f61-0c1d2bd6a1c0)
\t Link 0: 26.562 GB/s
\t Link 1: 13.281 GB/s
\t Link 2: 26.562 GB/s
"""


def test_nvlink_links_down_and_slow():
    assert nvidia_smi.parse_nvlink_status(NVLINK)["0"]["links"] == {0: 26.562, 1: None, 2: 26.562}
    profile = dict(_SAMPLE.PROFILE, health={"nvlink": {"links": 3, "min_gbps": 26.5}})
    ctx = _SAMPLE.sample_inputs(profile=profile)
    ctx.facts["gpus"] = ctx.facts["gpus"][:2]
    ctx.outputs["nvidia_smi_nvlink"] = NVLINK
    check = _check(ctx, "gpu.nvlink")
    assert check["status"] == "fail"
    assert check["reason"] == "GPU 0: 2 of 3 links up (inactive: 1); GPU 1: links 1 below 26.5 GB/s"
    with pytest.raises(ValueError, match="neither"):
        nvidia_smi.parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: garbage\n")
    # the plain GPU listing (another nvidia-smi command) is not an NVLink status
    with pytest.raises(ValueError, match="UUID"):
        nvidia_smi.parse_nvlink_status("GPU 0000:18:00.0: NVIDIA H100 80GB HBM3\n")


DCGM4 = {"DCGM Diagnostic": {"version": "4.1.1", "test_categories": [
    {"category": "Deployment", "tests": [{"name": "software", "results": [{"entity_group": "GPU", "status": "Pass"}]}]},
    {"category": "Hardware", "tests": [{"name": "memory", "results": [
        {"gpu_id": 0, "status": "Pass"},
        {"gpu_id": 5, "status": "Fail", "warnings": [{"warning": "Error using CUDA API cudaMalloc (row remapping pending)", "error_id": 28}]}]}]}]}}


def test_dcgm_diag_json_fail_names_test_gpu_and_warning():
    parsed = dcgm.parse_dcgm_diag("Successfully ran diagnostic for group.\n" + json.dumps(DCGM4))
    assert parsed["version"] == "4.1.1" and [r["status"] for r in parsed["results"]] == ["pass", "pass", "fail"]
    profile = copy.deepcopy(_SAMPLE.PROFILE)
    profile["probes"]["dcgm"] = {"enabled": True}
    ctx = _SAMPLE.sample_inputs(profile=profile)
    ctx.outputs["dcgm_diag"] = json.dumps(DCGM4)
    check = _check(ctx, "gpu.dcgm_diag")
    assert check["status"] == "fail"
    assert check["reason"] == "DCGM diagnostics failed: memory (GPU 5): Error using CUDA API cudaMalloc (row remapping pending)"
    with pytest.raises(ValueError, match="runtime error: Couldn't connect"):
        dcgm.parse_dcgm_diag('{"DCGM GPU Diagnostic": {"runtime_error": "Couldn\'t connect to nv-hostengine"}}')
    # An enabled probe without output is required: red, naming the cause.
    del ctx.outputs["dcgm_diag"]
    check = _check(ctx, "gpu.dcgm_diag")
    assert check["status"] == "fail" and "dcgmi diag -j output not collected" in check["reason"]


def test_nvme_smart_log_both_nvme_cli_shapes():
    old = '{"critical_warning" : 0, "avail_spare" : 100, "spare_thresh" : 10, "percent_used" : 2, "media_errors" : 0}'
    new = '{"critical_warning":{"value":4,"available_spare":0},"avail_spare":9,"spare_thresh":10,"percent_used":2,"media_errors":"0x1"}'
    assert nvme.parse_smart_log(old) == {"critical_warning": 0, "avail_spare": 100, "spare_thresh": 10, "percent_used": 2, "media_errors": 0}
    assert nvme.parse_smart_log(new)["critical_warning"] == 4 and nvme.parse_smart_log(new)["media_errors"] == 1
    profile = dict(_SAMPLE.PROFILE, health={"nvme": {"count": 1, "max_media_errors": 0}})
    ctx = _SAMPLE.sample_inputs(profile=profile)
    ctx.outputs["nvme_smart_nvme0"] = new
    check = _check(ctx, "nvme.health")
    assert check["reason"] == "nvme0 critical warning 0x04; nvme0 spare 9% below its threshold 10%; nvme0 1 media errors > 0"
    ctx.outputs["nvme_smart_nvme0"] = "not json"
    check = _check(ctx, "nvme.health")
    assert check["status"] == "error" and "outputs.nvme_smart_nvme0" in check["reason"]


def _ecc_block(uncorrectable=0, pending="No"):
    return ("    ECC Errors\n        Volatile\n            SRAM Uncorrectable Parity     : 0\n"
            "            DRAM Uncorrectable            : %d\n    Remapped Rows\n        Pending                           : %s\n"
            "        Remapping Failure Occurred        : No\n    Fabric" % (uncorrectable, pending))


def test_ecc_and_remap_on_a_hand_written_block():
    clean = _SAMPLE.nvidia_smi_q(_SAMPLE.sample_facts())
    profile = dict(_SAMPLE.PROFILE, health={"ecc": True})
    ctx = _SAMPLE.sample_inputs(profile=profile)
    # Only the first GPU has the blocks: its failure shows, the others' missing blocks do not hide it.
    ctx.outputs["nvidia_smi_q"] = clean.replace("    Fabric", _ecc_block(1, "Yes"), 1)
    check = _check(ctx, "gpu.ecc")
    assert check["status"] == "fail"
    assert check["reason"] == "GPU 00000000:18:00.0: 1 uncorrectable volatile ECC errors; GPU 00000000:18:00.0: row remapping pending (reset the GPU)"
    ctx.outputs["nvidia_smi_q"] = clean.replace("    Fabric", _ecc_block())
    assert _check(ctx, "gpu.ecc")["status"] == "pass"
    ctx.outputs["nvidia_smi_q"] = clean.replace("    Fabric", _ecc_block(), 7)
    check = _check(ctx, "gpu.ecc")
    assert check["status"] == "skip" and check["reason"] == "no data: nvidia-smi -q has no ECC Errors / Remapped Rows for GPU 00000000:88:00.0"


def test_yum_versionlock_epoch_first_is_the_package_name():
    text = ("Loaded plugins: fastestmirror, versionlock\n0:kernel-3.10.0-1160.el7.*\n"
            "1:nvidia-driver-550.90.07-1.el7.*\nversionlock list done\n")
    assert pkgparse.parse_versionlock(text) == {"kernel", "nvidia-driver"}
