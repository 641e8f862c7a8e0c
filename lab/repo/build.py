"""The lab's local apt repository: dummy packages with real names and versions, built with equivs.

    python3 -m lab.repo.build DEST        # builds what is missing; DEST/Packages(.gz) is the repository

Each dummy installs a small but realistic footprint (kernel images under /boot, version files, a
stand-in ``nv-fabricmanager`` daemon and unit, ``nvidia-smi`` and ``ofed_info`` that answer from the
twin's rendered hardware view), so apt pinning, holds, upgrades and downgrades behave as in production.
The repository is cached: DEST/.stamp holds a hash of this file and of files/; a rebuild happens only
when they change. Versions follow the real archives: Ubuntu 22.04 HWE kernels (``linux-image-6.8.0-45-generic``
``6.8.0-45.45~22.04.1``), Ubuntu NVIDIA revisions (``550.90.07-0ubuntu0.22.04.1``), MLNX_OFED/DOCA-OFED.
"""
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, "files")
MAINTAINER = "gpufleet lab <lab@gpufleet.invalid>"

# The data: every package of the repository. Two kernels, two driver branches (550 at two versions,
# so "installed but not the pinned one" and "upgrade splits driver and FM" can happen), OFED at two.
# Kernels as the fleet's Ubuntu 22.04 HWE archive names them (the profile pins linux-image-6.8.0-45-generic).
KERNELS = [("6.8.0-40-generic", "6.8.0-40.40~22.04.3"), ("6.8.0-45-generic", "6.8.0-45.45~22.04.1")]
NVIDIA = [("535", "535.183.01"), ("550", "550.54.15"), ("550", "550.90.07"), ("580", "580.65.06")]
NVIDIA_REVISION = "-0ubuntu0.22.04.1"
# From R580 NVIDIA's CUDA repository ships the fabric manager unversioned, with CUDA's "-1" revision,
# providing the branch name: nvidia-fabricmanager 580.65.06-1 Provides nvidia-fabricmanager-580
# (asking apt for nvidia-fabricmanager-580=580.65.06-1 fails: it is only virtual). DOMAIN.md section 4.
UNVERSIONED_FM_FROM = 580
CUDA_REVISION = "-1"
# Ubuntu's signed precompiled modules (one package per driver branch and kernel, versioned like the
# kernel): only for 550.90.07 on the pinned kernel, so the other combinations take DKMS, as on a
# real archive that lags behind. The "+1" suffix is *unverified*.
PRECOMPILED = [("550", "550.90.07", "6.8.0-45-generic", "6.8.0-45.45~22.04.1+1")]
NVIDIA_MODULES = "nvidia nvidia-modeset nvidia-uvm nvidia-peermem"
# (MLNX_OFED release, mlnx-ofed-kernel Debian version, doca-ofed version) -- doca-ofed numbers *unverified*
INFINIBAND_DIAGS = "2307mlnx47-1.2310119"  # as MLNX_OFED 23.10 names it (*unverified*)
MLNX_TOOLS = "23.10-0.2310119"             # mlnx-tools of MLNX_OFED 23.10 (mlnx_qos) (*unverified*)
OFED_MODULES = "mlx5_core mlx5_ib ib_core ib_uverbs mlx_compat"
OFED = [("23.10-1.1.9.0", "23.10.OFED.23.10.1.1.9.1-1", "2.5.0-0.0.1"),
        ("24.04-0.7.0.0", "24.04.OFED.24.04.0.7.0.1-1", "2.7.0-0.0.1")]


KERNEL_CONFIG = ('CONFIG_LOCALVERSION=""\nCONFIG_HUGETLBFS=y\nCONFIG_TRANSPARENT_HUGEPAGE=y\n'
                 'CONFIG_NUMA_BALANCING=y\nCONFIG_INTEL_IOMMU=y')
FM_CONFIG = "LOG_LEVEL=4\nLOG_FILE_NAME=/var/log/fabricmanager.log\nFABRIC_MODE=0\nFABRIC_MODE_RESTART=0"


def _stand_in(name, **subst):
    with open(os.path.join(FILES, name)) as handle:
        text = handle.read()
    for key, value in subst.items():
        text = text.replace("@%s@" % key, value)
    return text


def _dkms_build(name, package, debversion, modversion, modules):
    return _stand_in("twin-dkms-build", DKMSNAME=name, PACKAGE=package, DEBVERSION=debversion,
                     MODVERSION=modversion, MODULES=modules)


def _dkms_prerm(modules):
    files = " ".join("$k/updates/dkms/%s.ko" % m for m in modules.split())
    return ("#!/bin/sh\nset -e\nfor k in /lib/modules/*; do\n  rm -f %s\n"
            "  depmod -a $(basename $k) 2>/dev/null || true\ndone\n" % files)


def _nvidia(branch, upstream):
    """The driver metapackage (with nvidia-smi and nvidia-persistenced stand-ins), its fabric manager
    (branch-named, or from R580 unversioned providing the branch name) and its DKMS module package."""
    version = upstream + NVIDIA_REVISION
    subst = {"BRANCH": branch, "VERSION": upstream}
    out = [{
        # One driver at a time, like Ubuntu's packages (they all provide and conflict with this name).
        "Package": "nvidia-driver-%s-server" % branch, "Version": version, "Section": "restricted/libs",
        "Provides": "nvidia-driver-binary", "Conflicts": "nvidia-driver-binary",
        "Description": "NVIDIA Server Driver metapackage -- gpufleet lab dummy",
        "files": {
            "/usr/bin/nvidia-smi": (0o755, _stand_in("nvidia-smi", **subst)),
            "/usr/bin/nvidia-persistenced": (0o755, _stand_in("nvidia-persistenced", **subst)),
            "/lib/systemd/system/nvidia-persistenced.service": (0o644, _stand_in("nvidia-persistenced.service")),
            "/usr/share/nvidia/nvidia-application-profiles-%s-rc" % upstream: (0o644, "{\"rules\": [], \"profiles\": []}"),
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." + upstream: (0o644, "gpufleet lab dummy NVML " + upstream),
        },
        "links": {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "libnvidia-ml.so." + upstream},
        "postinst": "#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi\n",
    }]
    fm = {
        "Section": "restricted/libs", "Description": "Fabric Manager for NVSwitch based systems -- gpufleet lab dummy",
        "files": {
            "/usr/bin/nv-fabricmanager": (0o755, _stand_in("nv-fabricmanager", **subst)),
            "/lib/systemd/system/nvidia-fabricmanager.service": (0o644, _stand_in("nvidia-fabricmanager.service")),
            "/usr/share/nvidia/nvswitch/fabricmanager.cfg": (0o644, FM_CONFIG),
        },
        "postinst": "#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi\n",
    }
    if int(branch) >= UNVERSIONED_FM_FROM:
        fm.update({"Package": "nvidia-fabricmanager", "Version": upstream + CUDA_REVISION,
                   "Provides": "nvidia-fabricmanager-%s (= %s)" % (branch, upstream + CUDA_REVISION),
                   "Conflicts": "nvidia-fabricmanager-%s" % branch})
    else:
        # No dependency on the exact driver version, as in the real archive: nothing stops a mismatch.
        fm.update({"Package": "nvidia-fabricmanager-" + branch, "Version": version,
                   "Provides": "nvidia-fabricmanager", "Conflicts": "nvidia-fabricmanager"})
    out.append(fm)
    dkms = "nvidia-dkms-%s-server" % branch
    build = "/usr/lib/gpufleet-twin/nvidia-dkms-build"
    out.append({
        "Package": dkms, "Version": version, "Section": "restricted/kernel",
        "Provides": "nvidia-dkms-kernel", "Conflicts": "nvidia-dkms-kernel",
        "Description": "NVIDIA DKMS package (built for every kernel with headers) -- gpufleet lab dummy",
        "files": {build: (0o755, _dkms_build("nvidia", dkms, version, upstream, NVIDIA_MODULES)),
                  "/etc/kernel/header_postinst.d/nvidia-dkms": (0o755, "#!/bin/sh\nexec %s \"$1\"" % build)},
        "postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then %s; fi\n" % build,
        "prerm": _dkms_prerm(NVIDIA_MODULES),
    })
    return out


def _precompiled(branch, upstream, kernel, version):
    """linux-modules-nvidia-<branch>-server-<kernel>: the driver's modules for one kernel, ready made."""
    dest = "/lib/modules/%s/kernel/nvidia-%ssrv" % (kernel, branch)
    build = "/usr/lib/gpufleet-twin/linux-modules-nvidia-%s-%s" % (branch, kernel)
    name = "linux-modules-nvidia-%s-server-%s" % (branch, kernel)
    script = _dkms_build("nvidia (precompiled)", name, version, upstream, NVIDIA_MODULES).replace(
        '"/lib/modules/%s/updates/dkms" % kernel', repr(dest))
    return {
        "Package": name, "Version": version, "Section": "restricted/kernel",
        "Description": "Linux kernel nvidia modules for version %s -- gpufleet lab dummy" % kernel,
        "files": {build: (0o755, script)},
        # written at configure time for exactly this kernel, like the files the real package ships
        "postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then %s %s; fi\n" % (build, kernel),
        "prerm": "#!/bin/sh\nset -e\nrm -rf %s\ndepmod -a %s 2>/dev/null || true\n" % (dest, kernel),
    }


def packages():
    """Return the list of package specs: dicts with control fields, files {path: (mode, text)}, links."""
    out = []
    for abi, version in KERNELS:
        out.append({
            "Package": "linux-image-" + abi, "Version": version, "Section": "kernel",
            "Provides": "linux-image, wireguard-modules (= 1.0.0)",
            "Description": "Signed kernel image generic %s -- gpufleet lab dummy" % abi,
            "files": {
                "/boot/vmlinuz-" + abi: (0o644, "gpufleet lab dummy kernel image %s (%s)" % (abi, version)),
                "/boot/initrd.img-" + abi: (0o644, "gpufleet lab dummy initramfs for %s" % abi),
                "/boot/config-" + abi: (0o644, KERNEL_CONFIG),
                "/boot/System.map-" + abi: (0o644, "ffffffff81000000 T _stext"),
                "/usr/lib/modules/%s/modules.order" % abi: (0o644, ""),
                "/usr/lib/modules/%s/modules.builtin" % abi: (0o644, ""),
                "/usr/lib/modules/%s/modules.builtin.modinfo" % abi: (0o644, ""),
            },
        })
        out.append({
            "Package": "linux-headers-" + abi, "Version": version, "Section": "kernel",
            "Description": "Header files for Linux %s -- gpufleet lab dummy" % abi,
            "files": {"/usr/src/linux-headers-%s/Makefile" % abi: (0o644, "# gpufleet lab dummy headers %s" % abi)},
            "links": {"/usr/lib/modules/%s/build" % abi: "/usr/src/linux-headers-" + abi},
            # as Debian's headers packages do: DKMS builds its modules for the new kernel from this hook
            "postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ] && [ -d /etc/kernel/header_postinst.d ]; then\n"
                        "  run-parts --report --exit-on-error --arg=%s /etc/kernel/header_postinst.d\nfi\n" % abi,
        })
    for branch, upstream in NVIDIA:
        out += _nvidia(branch, upstream)
    for branch, upstream, kernel, version in PRECOMPILED:
        out.append(_precompiled(branch, upstream, kernel, version))
    for ofed, kernel_version, doca_version in OFED:
        subst = {"OFED": ofed, "OFEDSHORT": ofed.split("-")[0], "DEBVERSION": kernel_version}
        out.append({
            "Package": "mlnx-ofed-kernel-utils", "Version": kernel_version, "Section": "net",
            "Description": "Userspace tools to restart and tune mlnx-ofed kernel modules -- gpufleet lab dummy",
            "files": {"/usr/bin/ofed_info": (0o755, _stand_in("ofed_info", **subst)),
                      "/etc/infiniband/info": (0o755, "#!/bin/sh\necho prefix=/usr\necho Kernel=$(uname -r)\necho\n"
                                                      "echo \"Configure options: --with-mlx5-mod\"")},
        })
        build = "/usr/lib/gpufleet-twin/mlnx-ofed-dkms-build"
        out.append({
            "Package": "mlnx-ofed-kernel-dkms", "Version": kernel_version, "Section": "kernel",
            "Depends": "mlnx-ofed-kernel-utils (= %s)" % kernel_version,
            "Description": "DKMS support for mlnx-ofed kernel modules -- gpufleet lab dummy",
            "files": {"/usr/src/mlnx-ofed-kernel-%s/dkms.conf" % ofed.split("-")[0]:
                      (0o644, "PACKAGE_NAME=\"mlnx-ofed-kernel\"\nPACKAGE_VERSION=\"%s\"" % ofed.split("-")[0]),
                      build: (0o755, _dkms_build("mlnx-ofed-kernel", "mlnx-ofed-kernel-dkms", kernel_version,
                                                 ofed.split("-")[0], OFED_MODULES)),
                      "/etc/kernel/header_postinst.d/mlnx-ofed-kernel": (0o755, "#!/bin/sh\nexec %s \"$1\"" % build)},
            # DKMS builds for every kernel with headers at install time, and removes its modules on removal.
            "postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then %s; fi\n" % build,
            "prerm": _dkms_prerm(OFED_MODULES),
        })
        out.append({
            "Package": "doca-ofed", "Version": doca_version, "Section": "net",
            "Depends": "mlnx-ofed-kernel-dkms (= {0}), mlnx-ofed-kernel-utils (= {0}), infiniband-diags".format(kernel_version),
            "Description": "DOCA-OFED meta package -- gpufleet lab dummy", "files": {},
        })
    out.append({
        "Package": "infiniband-diags", "Version": INFINIBAND_DIAGS, "Section": "net",
        "Description": "InfiniBand diagnostic programs -- gpufleet lab dummy",
        "files": {"/usr/sbin/ibnetdiscover": (0o755, _stand_in("ibnetdiscover", DEBVERSION=INFINIBAND_DIAGS))},
    })
    out.extend(device_tools())
    out.append({
        # what the roce role runs on a RoCE twin's real rail interfaces (lab/twin/rails.py)
        "Package": "mlnx-tools", "Version": MLNX_TOOLS, "Section": "net",
        "Description": "mlnx_qos stand-in keeping a RoCE twin's QoS per interface -- gpufleet lab dummy",
        "files": {"/usr/bin/mlnx_qos": (0o755, _stand_in("mlnx_qos"))},
    })
    return out


# Device tools the pcie and firmware roles run, as stand-ins acting on the twin's rendered view
# (one script, lab/repo/files/twin-devtools, dispatching on its name). Real package names, so the
# roles install them as on a real node; versions *unverified* beyond the upstream number.
DEVICE_TOOLS = [
    ("pciutils", "1:3.9.0-4", ["/usr/bin/setpci"]),
    ("mft", "4.26.1-3", ["/usr/bin/mlxconfig", "/usr/bin/flint", "/usr/bin/mlxfwmanager"]),
    ("nvme-cli", "2.4+really2.3-3", ["/usr/sbin/nvme"]),
]


def device_tools():
    out = []
    for package, version, links in DEVICE_TOOLS:
        tool = "/usr/lib/gpufleet-twin/devtools-" + package
        out.append({
            "Package": package, "Version": version, "Section": "utils",
            "Description": "%s stand-in acting on the twin's hardware view -- gpufleet lab dummy" % package,
            # one copy of the script per package (dpkg refuses two packages owning one file); it
            # dispatches on the name it is run as (the link's), so each link is one tool
            "files": {tool: (0o755, _stand_in("twin-devtools"))},
            "links": dict((link, tool) for link in links),
        })
    return out


def control_text(spec, workdir):
    """The equivs control file for ``spec`` (maintainer scripts are written into ``workdir``)."""
    lines = ["Section: " + spec.get("Section", "misc"), "Priority: optional", "Standards-Version: 4.6.2",
             "Package: " + spec["Package"], "Version: " + spec["Version"], "Maintainer: " + MAINTAINER,
             "Architecture: amd64"]
    for field in ("Depends", "Provides", "Conflicts"):
        if spec.get(field):
            lines.append("%s: %s" % (field, spec[field]))
    for script in ("preinst", "postinst", "prerm", "postrm"):
        if spec.get(script):
            path = os.path.join(workdir, script)
            with open(path, "w") as handle:
                handle.write(spec[script])
            lines.append("%s: %s" % (script.capitalize(), path))
    if spec.get("links"):
        lines.append("Links: " + "\n ".join("%s %s" % (target, link) for link, target in sorted(spec["links"].items())))
    for path, (mode, text) in sorted(spec["files"].items()):
        # equivs: body lines indented by one space; an empty line is written as " ."
        body = "\n".join(" " + (line if line.strip() else ".") for line in text.split("\n"))
        lines.append("File: %s %o\n%s" % (path, mode, body))
    lines.append("Description: " + spec["Description"])
    return "\n".join(lines) + "\n"


def stamp():
    digest = hashlib.sha256()
    for path in [os.path.abspath(__file__)] + sorted(os.path.join(FILES, n) for n in os.listdir(FILES)):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:16]


def _build_one(spec, outdir):
    work = tempfile.mkdtemp(prefix="gpufleet-equivs-")
    try:
        ctl = os.path.join(work, "ctl")
        with open(ctl, "w") as handle:
            handle.write(control_text(spec, work))
        proc = subprocess.run(["equivs-build", ctl], cwd=work, capture_output=True, text=True, timeout=300)
        debs = [n for n in os.listdir(work) if n.endswith(".deb")]
        if proc.returncode != 0 or len(debs) != 1:
            raise RuntimeError("equivs-build %s %s failed (exit %d): %s" % (
                spec["Package"], spec["Version"], proc.returncode, (proc.stderr or proc.stdout)[-2000:]))
        shutil.move(os.path.join(work, debs[0]), os.path.join(outdir, debs[0]))
        return debs[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build(dest, jobs=2):
    """Build the repository in ``dest`` unless its stamp is current. Returns True when it (re)built."""
    want = stamp()
    stamp_file = os.path.join(dest, ".stamp")
    if os.path.exists(stamp_file) and open(stamp_file).read().strip() == want:
        return False
    for tool in ("equivs-build", "dpkg-scanpackages"):
        if not shutil.which(tool):
            raise RuntimeError("repo: %s not found (apt-get install equivs dpkg-dev)" % tool)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".repo-", dir=os.path.dirname(os.path.abspath(dest)))
    os.chmod(tmp, 0o755)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda spec: _build_one(spec, tmp), packages()))
    scan = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=tmp, capture_output=True,
                          text=True, check=True, timeout=120)
    with open(os.path.join(tmp, "Packages"), "w") as handle:
        handle.write(scan.stdout)
    subprocess.run(["gzip", "-9kf", "Packages"], cwd=tmp, check=True, timeout=60)
    with open(os.path.join(tmp, ".stamp"), "w") as handle:
        handle.write(want + "\n")
    # Replace the contents, not the folder: running twins bind-mount this folder (its inode).
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(dest):
        if name not in os.listdir(tmp):
            os.unlink(os.path.join(dest, name))
    for name in sorted(os.listdir(tmp), key=lambda n: n == ".stamp"):   # the stamp last
        os.replace(os.path.join(tmp, name), os.path.join(dest, name))
    shutil.rmtree(tmp, ignore_errors=True)
    return True


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 -m lab.repo.build DEST")
    built = build(sys.argv[1])
    print("repo: %s %s" % (sys.argv[1], "built" if built else "up to date"))
