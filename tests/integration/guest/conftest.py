"""Real consumers of the guest plan (issue 24): QEMU boots it, cloud-hypervisor's OpenAPI schema and
libvirt accept it. Fixtures: the lab models' facts, plans made from them, a private libvirtd.

A tool that is missing skips its tests with the package to install (.ci/deps.sh installs them all).
"""
import os
import shutil
import subprocess
import tempfile
import time
import warnings

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import plan_guests
from lab.hw import ttar

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
TREES = os.path.join(REPO, "tests", "fixtures", "trees")
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
# guest-mini has one core per NUMA node: nothing is kept for the host there, or no guest fits.
MINI_OPTIONS = {"reserve_host_cpus": 0}


@pytest.fixture(scope="session")
def tree_facts():
    """Factory: tree_facts("guest-mini") -> ansible_facts.gpufleet of that captured tree (cached)."""
    cache = {}

    def _facts(name):
        if name not in cache:
            dest = tempfile.mkdtemp(prefix="gpufleet-guest-%s-" % name, dir=FAST_TMP)
            try:
                with open(os.path.join(TREES, name + ".ttar")) as handle:
                    ttar.unpack(handle.read(), dest)
                cache[name] = collect(dest)[0]
            finally:
                shutil.rmtree(dest, ignore_errors=True)
        return cache[name]
    return _facts


@pytest.fixture(scope="session")
def plans(tree_facts):
    """Factory: plans("guest-mini", [{name, gpus}, ...], options) -> the planner's plans."""
    def _plans(tree, requests, options=None):
        return plan_guests(tree_facts(tree), requests, options)
    return _plans


def need(*tools):
    """Skip unless every tool is on PATH (the message names the Debian package: .ci/deps.sh)."""
    packages = {"qemu-system-x86_64": "qemu-system-x86", "cpio": "cpio", "virsh": "libvirt-clients",
                "virt-xml-validate": "libvirt-clients", "xmllint": "libxml2-utils", "libvirtd": "libvirt-daemon-system"}
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip("needs %s (apt-get install %s, or .ci/deps.sh)"
                    % (", ".join(missing), " ".join(sorted(set(packages.get(t, t) for t in missing)))))


class Libvirt:
    """A libvirt connection for the tests: ``uri``, ``virsh(*args)``, ``base`` (a folder the daemon's
    user can read and write), and ``why`` when it is the test driver instead of a real daemon."""

    def __init__(self, uri, base, why=None):
        self.uri = uri
        self.base = base
        self.why = why

    def virsh(self, *args, check=True):
        proc = subprocess.run(["virsh", "-q", "-c", self.uri] + list(args), capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise AssertionError("virsh %s: exit %d: %s" % (" ".join(args), proc.returncode, proc.stderr.strip()))
        return proc

    def define_and_read(self, xml, name):
        """Define the domain ``xml``, read it back, undefine it, in one virsh session (the test
        driver keeps nothing between two connections). Returns (True, dumped XML) or (False, error)."""
        path = os.path.join(self.base, name + ".xml")
        with open(path, "w") as handle:
            handle.write(xml)
        proc = self.virsh("define %s; dumpxml %s; undefine %s" % (path, name, name), check=False)
        if proc.returncode != 0:
            return False, proc.stderr.strip()
        return True, proc.stdout


def _start_libvirtd(base):
    """A session-mode libvirtd of its own: run as the unprivileged user ``nobody`` with every folder
    under ``base`` (config, run, cache), so it shares nothing with a system libvirtd, writes nothing
    outside ``base`` and leaves nothing behind. Returns (process, socket path)."""
    os.chmod(base, 0o755)
    shutil.chown(base, "nobody", "nogroup")
    env = dict(os.environ, HOME=base, XDG_RUNTIME_DIR=os.path.join(base, "run"),
               XDG_CONFIG_HOME=os.path.join(base, "config"), XDG_CACHE_HOME=os.path.join(base, "cache"))
    log = open(os.path.join(base, "libvirtd.log"), "w")
    proc = subprocess.Popen(["runuser", "-u", "nobody", "--", "libvirtd"], env=env, cwd=base,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    sock = os.path.join(base, "run", "libvirt", "libvirt-sock")
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            with open(os.path.join(base, "libvirtd.log")) as handle:
                errors = [line for line in handle.read().splitlines() if " error : " in line] or ["(no error logged)"]
                raise RuntimeError("libvirtd did not start: %s" % errors[-1].split(" error : ", 1)[-1])
        time.sleep(0.1)
    return proc, sock


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def _stop_virtlogd(base):
    """The daemon starts its own virtlogd for a guest's log (session mode: it would linger 2 min)."""
    pidfile = os.path.join(base, "run", "libvirt", "virtlogd.pid")
    if os.path.exists(pidfile):
        with open(pidfile) as handle:
            text = handle.read().strip()
        if text.isdigit():
            try:
                os.kill(int(text), 15)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="session")
def libvirt():
    """A real libvirtd (QEMU driver, session mode) started for this test session; where it cannot
    run (not root, no libvirtd), libvirt's test driver ``test:///default``, which parses and keeps
    domains the same way, with the reason in ``why`` (and a warning)."""
    need("virsh")
    # its own folder, not pytest's tmp_path: that one's parents are closed to the daemon's user
    base = tempfile.mkdtemp(prefix="gpufleet-libvirtd-")
    try:
        yield from _libvirt(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _libvirt(base):
    if os.geteuid() != 0 or not shutil.which("libvirtd") or not shutil.which("runuser"):
        why = "libvirtd cannot run here (needs root to start it as nobody, libvirtd, runuser)"
        warnings.warn("libvirt tests use test:///default: " + why)
        yield Libvirt("test:///default", base, why)
        return
    try:
        proc, sock = _start_libvirtd(base)
    except RuntimeError as exc:
        warnings.warn("libvirt tests use test:///default: %s" % exc)
        yield Libvirt("test:///default", base, str(exc))
        return
    try:
        yield Libvirt("qemu+unix:///session?socket=" + sock, base)
    finally:
        _stop(proc)
        _stop_virtlogd(base)
