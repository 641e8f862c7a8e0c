"""The lab guest's boot files: Debian's cloud kernel and a busybox initramfs, built once and cached.

- kernel: the ``linux-image-<ver>-cloud-amd64`` package that Debian's ``linux-image-cloud-amd64``
  currently depends on (``GPUFLEET_GUEST_KERNEL`` names another), fetched with ``apt-get download``
  and unpacked with ``dpkg-deb -x``: nothing is installed on the machine.
- initramfs: busybox-static plus ``init.sh`` (the topology dump), a gzip'd newc cpio. Its cache
  name carries a hash of both, so an edited init script is rebuilt, never served stale.

The cache folder (``.build/guest-cache`` of the checkout, ``GPUFLEET_GUEST_CACHE`` elsewhere) is
what CI keeps between runs: a warm cache costs no download and no build.

    python3 -m lab.guest.build          # prints the kernel and initramfs paths (building them)
"""
import glob
import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INIT = os.path.join(HERE, "init.sh")
META = "linux-image-cloud-amd64"
BUSYBOX = "/bin/busybox"


class GuestBuildError(Exception):
    """A boot file could not be made: the message names the step and the cause."""


def cache_dir(cache=None):
    path = cache or os.environ.get("GPUFLEET_GUEST_CACHE") or os.path.join(REPO, ".build", "guest-cache")
    os.makedirs(path, exist_ok=True)
    return path


def _run(cmd, cwd=None):
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise GuestBuildError("%s: %s (install the lab's packages: .ci/deps.sh)" % (cmd[0], exc))
    if proc.returncode != 0:
        raise GuestBuildError("%s failed (exit %d): %s" % (" ".join(cmd), proc.returncode, proc.stderr.strip()[-500:]))
    return proc.stdout


def kernel_package():
    """The cloud kernel package to use: GPUFLEET_GUEST_KERNEL, else what the meta-package depends on."""
    pinned = os.environ.get("GPUFLEET_GUEST_KERNEL")
    if pinned:
        return pinned
    for line in _run(["apt-cache", "depends", META]).splitlines():
        name = line.strip().partition("Depends: ")[2]
        if name.startswith("linux-image-") and name.endswith("-cloud-amd64"):
            return name
    raise GuestBuildError("apt-cache depends %s names no linux-image-*-cloud-amd64 (apt-get update?)" % META)


def kernel(cache=None):
    """Path of the cached vmlinuz of the cloud kernel (downloaded and unpacked when missing)."""
    package = kernel_package()
    dest = os.path.join(cache_dir(cache), package, "vmlinuz")
    if os.path.exists(dest):
        return dest
    with tempfile.TemporaryDirectory(prefix="gpufleet-kernel-") as tmp:
        try:
            _run(["apt-get", "download", "-q", package], cwd=tmp)
        except GuestBuildError as exc:
            raise GuestBuildError("%s (stale package lists? apt-get update)" % exc)
        debs = glob.glob(os.path.join(tmp, package + "_*.deb"))
        if not debs:
            raise GuestBuildError("apt-get download %s left no .deb" % package)
        _run(["dpkg-deb", "-x", debs[0], os.path.join(tmp, "x")])
        images = glob.glob(os.path.join(tmp, "x", "boot", "vmlinuz-*"))
        if not images:
            raise GuestBuildError("%s holds no boot/vmlinuz-*" % os.path.basename(debs[0]))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        part = "%s.%d.part" % (dest, os.getpid())  # two test runs may build at once
        shutil.copyfile(images[0], part)
        os.replace(part, dest)
    return dest


def _initramfs_key():
    digest = hashlib.sha256()
    for path in (INIT, BUSYBOX):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:12]


def initramfs(cache=None):
    """Path of the cached initramfs (busybox + init.sh), built when missing or out of date."""
    if not os.path.exists(BUSYBOX):
        raise GuestBuildError("%s is missing: apt-get install busybox-static (.ci/deps.sh)" % BUSYBOX)
    dest = os.path.join(cache_dir(cache), "initramfs-%s.cpio.gz" % _initramfs_key())
    if os.path.exists(dest):
        return dest
    with tempfile.TemporaryDirectory(prefix="gpufleet-initramfs-") as stage:
        for sub in ("bin", "dev", "proc", "sys"):
            os.makedirs(os.path.join(stage, sub))
        shutil.copyfile(BUSYBOX, os.path.join(stage, "bin", "busybox"))
        os.chmod(os.path.join(stage, "bin", "busybox"), 0o755)
        os.symlink("busybox", os.path.join(stage, "bin", "sh"))
        shutil.copyfile(INIT, os.path.join(stage, "init"))
        os.chmod(os.path.join(stage, "init"), 0o755)
        names = sorted(os.path.relpath(os.path.join(d, n), stage)
                       for d, dirs, files in os.walk(stage) for n in dirs + files)
        archive = _cpio(stage, names)
    part = "%s.%d.part" % (dest, os.getpid())
    with open(part, "wb") as handle:
        handle.write(gzip.compress(archive, mtime=0))
    os.replace(part, dest)
    for old in glob.glob(os.path.join(os.path.dirname(dest), "initramfs-*.cpio.gz")):
        if old != dest:
            try:
                os.remove(old)  # an earlier init.sh's: never booted again
            except FileNotFoundError:
                pass
    return dest


def _cpio(stage, names):
    try:
        proc = subprocess.run(["cpio", "-o", "-H", "newc", "-R", "0:0", "--quiet"], cwd=stage,
                              input=("\n".join(names) + "\n").encode(), capture_output=True, check=False)
    except OSError as exc:
        raise GuestBuildError("cpio: %s (apt-get install cpio: .ci/deps.sh)" % exc)
    if proc.returncode != 0:
        raise GuestBuildError("cpio failed: %s" % proc.stderr.decode(errors="replace").strip())
    return proc.stdout


def artifacts(cache=None):
    """(kernel path, initramfs path), each built once into the cache."""
    return kernel(cache), initramfs(cache)


if __name__ == "__main__":
    print("\n".join(artifacts()))
