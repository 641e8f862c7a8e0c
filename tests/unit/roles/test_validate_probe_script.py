"""roles/validate/files/gpufleet_probe.py run for real, as the role runs it (python3 <script> <probe>).

This machine has no GPU, no CUDA, no nvbandwidth, nccl-tests, perftest or DCGM: every probe must say
"no data" naming what is missing (exit 3), never crash. Where a tool is present its output goes out
unchanged with exit 0 whatever the tool's own exit code (dcgmi exits non-zero when a test fails):
shown with a stand-in dcgmi that prints the DCGM 3 document, read back by the gate's parser.
"""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers import dcgm

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "roles", "validate", "files", "gpufleet_probe.py")


def probe(*args, path=None):
    env = dict(os.environ, PATH=path or "/nonexistent", PYTHONPATH="")
    # -S: no site-packages, so no PyTorch or CUDA wheel of this machine's Python is found either.
    return subprocess.run([sys.executable, "-S", SCRIPT] + list(args), capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("args,missing", [
    (["p2p"], "nvbandwidth is not on this node"),
    (["nccl"], "nccl-tests (all_reduce_perf) is not on this node"),
    (["gdr", "--pair=mlx5_0=0000:18:00.0"], "perftest (ib_write_bw) is not on this node"),
    (["dcgm", "--level", "2"], "DCGM (dcgmi) is not on this node"),
])
def test_a_node_without_the_tool_is_no_data_naming_it(args, missing):
    proc = probe(*args)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "" and proc.stderr.startswith("no data: ") and missing in proc.stderr


def test_h2d_without_cuda_pytorch_or_nvbandwidth_is_no_data():
    proc = probe("h2d")
    if proc.returncode == 0:
        pytest.skip("this machine has a CUDA runtime: the H2D probe measured for real")
    assert proc.returncode == 3, proc.stderr
    # this machine may carry a CUDA runtime without a driver: then the reason says so
    assert ("neither the CUDA runtime (libcudart), PyTorch nor nvbandwidth is on this node" in proc.stderr
            or "the CUDA runtime found no usable GPU (cudaGetDeviceCount failed: CUDA error" in proc.stderr), proc.stderr


def test_no_probe_named_is_a_usage_error():
    proc = probe()
    assert proc.returncode == 2 and "name a probe" in proc.stderr


def test_a_failing_tool_still_hands_its_output_to_the_gate(tmp_path):
    doc = {"DCGM GPU Diagnostic": {"version": "3.3.5", "test_categories": [{"category": "Deployment", "tests": [
        {"name": "Persistence Mode", "results": [{"gpu_ids": "0", "status": "Fail",
                                                  "warnings": [{"warning": "Persistence mode for GPU 0 is disabled.", "error_id": 13}]}]}]}]}}
    stand_in = tmp_path / "dcgmi"
    # sh builtins only: PATH holds nothing but the stand-in
    stand_in.write_text("#!/bin/sh\n[ \"$1 $2 $3 $4\" = \"diag -r 2 -j\" ] || exit 9\necho 'Successfully ran diagnostic for group.'\n"
                        "echo '%s'\nexit 226\n" % json.dumps(doc))
    stand_in.chmod(0o755)
    proc = probe("dcgm", "--level", "2", path=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    parsed = dcgm.parse_dcgm_diag(proc.stdout)
    assert parsed["results"] == [{"category": "Deployment", "test": "Persistence Mode", "gpus": "0", "status": "fail",
                                  "info": "Persistence mode for GPU 0 is disabled."}]


def test_local_cpulist_is_read_as_the_kernel_writes_it(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.dirname(SCRIPT))
    try:
        import gpufleet_probe
    finally:
        sys.path.pop(0)
    real_open = open

    def fake_open(path, *a, **kw):
        if path == "/sys/bus/pci/devices/0000:18:00.0/local_cpulist":
            path = str(tmp_path / "local_cpulist")
        return real_open(path, *a, **kw)
    (tmp_path / "local_cpulist").write_text("0-12,104-116\n")
    monkeypatch.setattr("builtins.open", fake_open)
    assert gpufleet_probe.local_cpus("0000:18:00.0") == set(range(13)) | set(range(104, 117))
    assert gpufleet_probe.local_cpus("0000:ff:00.0") is None
