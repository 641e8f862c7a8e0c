#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Active probes of the gpufleet gate, run on a GPU node by validate_node (sent in its arguments).

    gpufleet_probe.py h2d  [--size-mib 1024] [--copies 30] [--runs 3]
    gpufleet_probe.py p2p
    gpufleet_probe.py nccl [--size 16G]
    gpufleet_probe.py gdr  --pair mlx5_0=0000:18:00.0 [--pair ...]
    gpufleet_probe.py dcgm [--level 1]

Each probe uses what the node has (the CUDA runtime, or PyTorch, or nvbandwidth; nccl-tests;
perftest; DCGM) and prints what the gate's parsers read (plugins/module_utils/_gate/parsers). A
node without the tool exits 3 with "no data: ..." on stderr: the check then says no data and names
the cause. A tool that ran but reported a failure still exits 0 with its output: the verdict is the
gate's, not the tool's exit code. Standard library only; Python 3.6+.
"""

import argparse
import ctypes
import glob
import os
import shutil
import subprocess
import sys
import time

NO_TOOL = 3


class NoTool(Exception):
    """What the probe needs is not on this node."""


def _which(name, extra_dirs=()):
    found = shutil.which(name)
    if found:
        return found
    for folder in extra_dirs:
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return None


def _run(argv, env=None, timeout=3600):
    """stdout and stderr of argv together (NCCL logs to both), never raising on the exit code."""
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=timeout,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout


def local_cpus(bdf):
    """The CPUs of the GPU's NUMA node, from sysfs (``local_cpulist``: ``0-12,104-116``)."""
    try:
        with open("/sys/bus/pci/devices/%s/local_cpulist" % bdf.lower()) as handle:
            text = handle.read().strip()
    except (IOError, OSError):
        return None
    cpus = set()
    for part in text.split(","):
        first, _sep, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


# ---------------------------------------------------------------- h2d

def _cudart():
    """The CUDA runtime library: the system's, a CUDA toolkit's, or the one PyTorch wheels ship."""
    candidates = ["libcudart.so", "libcudart.so.12", "libcudart.so.11.0"]
    candidates += sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"), reverse=True)
    for path in sys.path:
        candidates += sorted(glob.glob(os.path.join(path, "nvidia", "cuda_runtime", "lib", "libcudart.so*")), reverse=True)
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class Cuda:
    """The few CUDA runtime calls the H2D probe needs, through ctypes."""

    H2D = 1

    def __init__(self, lib):
        self.lib = lib

    def call(self, name, *args):
        err = getattr(self.lib, name)(*args)
        if err != 0:
            raise RuntimeError("%s failed: CUDA error %d" % (name, err))

    def devices(self):
        count = ctypes.c_int()
        self.call("cudaGetDeviceCount", ctypes.byref(count))
        out = []
        for index in range(count.value):
            buf = ctypes.create_string_buffer(32)
            self.call("cudaDeviceGetPCIBusId", buf, 32, index)
            out.append((index, buf.value.decode().lower()))
        return out

    def h2d_runs(self, index, size, copies, runs):
        self.call("cudaSetDevice", index)
        host, dev = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("cudaMallocHost", ctypes.byref(host), ctypes.c_size_t(size))
        self.call("cudaMalloc", ctypes.byref(dev), ctypes.c_size_t(size))
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("cudaEventCreate", ctypes.byref(start))
        self.call("cudaEventCreate", ctypes.byref(stop))
        try:
            for _warm in range(3):      # warm-up: page tables, clocks, the copy engine
                self.call("cudaMemcpy", dev, host, ctypes.c_size_t(size), self.H2D)
            out = []
            for _run_no in range(runs):
                self.call("cudaEventRecord", start, None)
                for _copy in range(copies):
                    self.call("cudaMemcpyAsync", dev, host, ctypes.c_size_t(size), self.H2D, None)
                self.call("cudaEventRecord", stop, None)
                self.call("cudaEventSynchronize", stop)
                ms = ctypes.c_float()
                self.call("cudaEventElapsedTime", ctypes.byref(ms), start, stop)
                out.append(copies * size / (ms.value / 1000.0) / 1e9)
            return out
        finally:
            self.lib.cudaEventDestroy(start)
            self.lib.cudaEventDestroy(stop)
            self.lib.cudaFree(dev)
            self.lib.cudaFreeHost(host)


def _h2d_torch(size, copies, runs):
    import torch  # noqa: F401 (only where the node has it)
    if not torch.cuda.is_available():
        raise NoTool("PyTorch is installed but sees no CUDA device")
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        bdf = "%04x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id, props.pci_device_id)
        cpus = local_cpus(bdf)
        if cpus:
            os.sched_setaffinity(0, cpus)
        with torch.cuda.device(index):
            host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
            dev = torch.empty(size, dtype=torch.uint8, device="cuda")
            for _warm in range(3):
                dev.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
            for _run_no in range(runs):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _copy in range(copies):
                    dev.copy_(host, non_blocking=True)
                stop.record()
                stop.synchronize()
                print("GPU %s: %.2f GB/s" % (bdf, copies * size / (start.elapsed_time(stop) / 1000.0) / 1e9))
            del host, dev


def probe_h2d(args):
    """Host-to-device copy bandwidth per GPU (shared/DOMAIN.md section 7): the process pinned to the
    GPU's local CPUs before the pinned buffer is allocated (its pages land on the GPU's node), a
    1 GiB pinned buffer, 30 copies after warm-up, 3 runs. Prints ``GPU <bdf>: <x> GB/s`` per run."""
    size = args.size_mib * 1024 * 1024
    lib = _cudart()
    why = "neither the CUDA runtime (libcudart), PyTorch nor nvbandwidth is on this node"
    if lib is not None:
        cuda = Cuda(lib)
        try:
            devices = cuda.devices()
        except RuntimeError as exc:
            # A runtime without a driver (CUDA error 35) or without a GPU (100): no measurement here.
            devices, why = [], "the CUDA runtime found no usable GPU (%s)" % exc
        everything = os.sched_getaffinity(0)
        for index, bdf in devices:
            cpus = local_cpus(bdf)
            os.sched_setaffinity(0, cpus or everything)
            for value in cuda.h2d_runs(index, size, args.copies, args.runs):
                print("GPU %s: %.2f GB/s" % (bdf, value))
            sys.stdout.flush()
        if devices:
            return
    try:
        return _h2d_torch(size, args.copies, args.runs)
    except ImportError:
        pass
    tool = _which("nvbandwidth", ["/usr/local/bin", "/opt/nvbandwidth"])
    if tool is None:
        raise NoTool(why)
    # nvbandwidth cannot pin per GPU: its host_to_device_memcpy_ce case, once per run.
    for _run_no in range(args.runs):
        _rc, out = _run([tool, "-t", "host_to_device_memcpy_ce", "-b", str(args.size_mib), "-i", str(args.copies)])
        print(out)


# ---------------------------------------------------------------- p2p, nccl, gdr, dcgm

def probe_p2p(_args):
    """GPU-to-GPU copy bandwidth of every pair: nvbandwidth device_to_device_memcpy_read_ce."""
    tool = _which("nvbandwidth", ["/usr/local/bin", "/opt/nvbandwidth"])
    if tool is None:
        raise NoTool("nvbandwidth is not on this node")
    _rc, out = _run([tool, "-t", "device_to_device_memcpy_read_ce"])
    print(out)


def _gpu_count():
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def probe_nccl(args):
    """NCCL all-reduce over the node's GPUs with NCCL_DEBUG=INFO: the transport lines (NET/IB vs
    NET/Socket, GPU Direct RDMA) and the nccl-tests bandwidth table in one output."""
    dirs = [os.environ.get("NCCL_TESTS_DIR", ""), "/opt/nccl-tests/build", "/usr/local/nccl-tests/build", "/usr/local/bin"]
    tool = _which("all_reduce_perf", [d for d in dirs if d])
    if tool is None:
        raise NoTool("nccl-tests (all_reduce_perf) is not on this node (set NCCL_TESTS_DIR)")
    gpus = _gpu_count()
    if not gpus:
        raise NoTool("no NVIDIA GPU in /proc/driver/nvidia/gpus")
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET")
    _rc, out = _run([tool, "-b", args.size, "-e", args.size, "-f", "2", "-g", str(gpus)], env=env)
    print(out)


def _cuda_index(bdf):
    """CUDA device index of a GPU by PCI address (nvidia-smi lists them in CUDA's PCI order)."""
    smi = _which("nvidia-smi")
    if smi is None:
        raise NoTool("nvidia-smi is not on this node")
    _rc, out = _run([smi, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"])
    for line in out.splitlines():
        index, _sep, bus = line.partition(",")
        if bus.strip().lower().endswith(bdf.lower()[-12:]):
            return int(index)
    return None


def probe_gdr(args):
    """GPUDirect RDMA write bandwidth per rail: ib_write_bw --use_cuda=<the rail's GPU>, server
    and client on the same NIC (loopback through the HCA). One ``# gdr <nic> cuda <n> (<bdf>)``
    section per rail, then the client's output."""
    tool = _which("ib_write_bw")
    if tool is None:
        raise NoTool("perftest (ib_write_bw) is not on this node")
    if not args.pair:
        raise NoTool("no GPU-NIC pair given (--pair mlx5_0=0000:18:00.0)")
    port = 18515
    for pair in args.pair:
        nic, _sep, bdf = pair.partition("=")
        index = _cuda_index(bdf)
        print("# gdr %s cuda %s (%s)" % (nic, index if index is not None else "?", bdf))
        if index is None:
            print("no CUDA device at %s" % bdf)
            continue
        base = [tool, "-d", nic, "--use_cuda=%d" % index, "-s", "8388608", "-n", "5000", "-F", "--report_gbits", "-p", str(port)]
        server = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            _rc, out = _run(base + ["localhost"], timeout=300)
            print(out)
        finally:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        port += 1
        sys.stdout.flush()


def probe_dcgm(args):
    """DCGM diagnostics as JSON: dcgmi diag -r <level> -j (level 1 seconds, 2 minutes, 3 a quarter hour)."""
    tool = _which("dcgmi")
    if tool is None:
        raise NoTool("DCGM (dcgmi) is not on this node")
    _rc, out = _run([tool, "diag", "-r", str(args.level), "-j"], timeout=3600)
    print(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="probe")
    h2d = sub.add_parser("h2d")
    h2d.add_argument("--size-mib", type=int, default=1024)
    h2d.add_argument("--copies", type=int, default=30)
    h2d.add_argument("--runs", type=int, default=3)
    sub.add_parser("p2p")
    nccl = sub.add_parser("nccl")
    nccl.add_argument("--size", default="16G")
    gdr = sub.add_parser("gdr")
    gdr.add_argument("--pair", action="append", default=[])
    dcgm = sub.add_parser("dcgm")
    dcgm.add_argument("--level", type=int, choices=[1, 2, 3, 4], default=1)
    args = parser.parse_args(argv)
    probes = {"h2d": probe_h2d, "p2p": probe_p2p, "nccl": probe_nccl, "gdr": probe_gdr, "dcgm": probe_dcgm}
    if args.probe not in probes:
        parser.error("name a probe: %s" % ", ".join(sorted(probes)))
    try:
        probes[args.probe](args)
    except NoTool as exc:
        sys.stderr.write("no data: %s\n" % exc)
        return NO_TOOL
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        sys.stderr.write("%s probe failed: %s\n" % (args.probe, exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
