"""How many requests and how long one redfish_bios run costs, against the lab BMC (sushy-emulator).

    .venv/bin/python benchmarks/redfish_bench.py [--runs 5] [--captures]

Prints, per flavour: requests and wall time of the first run (writes), the second run (pending:
no write), and verify after the reset; and the cost of the htpasswd bcrypt factor (sushy checks
it on every request), basic vs session auth. With ../shared/realdata present, the same per real
BMC capture, served by the tests' own HTTPS server (tests/integration/redfish/captures/conftest.py),
with the registry size each run reads and resolves, and our fixture of a Bios that names no
AttributeRegistry (tests/fixtures/redfish/bios-without-attributeregistry: the registry is found by
scanning /redfish/v1/Registries). --captures: only these (no lab BMC). Figures and ratios only.
"""
import argparse
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, ".build"), REPO]

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios as _bios  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.power import power_cycle  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import RedfishClient  # noqa: E402

USER, PASSWORD = "bench", "bench-password-123"
WANT = {"snc": "snc4", "hyperthreading": True, "vtd": True}
CAPTURE_WANT = {"dell-r750-idrac6": {"snc": "snc2", "hyperthreading": True, "vtd": True},
                "lenovo-sr670v2-xcc": {"acs": False, "hyperthreading": True, "vtd": True},
                "hpe-dl385g10plus-ilo5": {"snc": "nps4", "hyperthreading": True, "vtd": True},
                "nvidia-dgx-h100-ami": {"power_profile": "efficiency", "hyperthreading": True, "vtd": True}}
FIXTURE_WANT = {"bios-without-attributeregistry": {"sriov": True, "hyperthreading": True}}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(tmp, flavour, name, rounds):
    certs = os.path.join(tmp, "certs-%d" % rounds)
    if not os.path.exists(certs):
        subprocess.run([sys.executable, "-m", "lab.bmc.certs", "--dir", certs, "--user", USER, "--password", PASSWORD,
                        "--rounds", str(rounds)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lab.bmc.serve", "--name", name, "--flavour", flavour, "--port", str(port),
                             "--state-dir", os.path.join(tmp, "state"), "--cert", os.path.join(certs, "server.pem"),
                             "--key", os.path.join(certs, "server.key"), "--htpasswd", os.path.join(certs, "htpasswd"),
                             "--reset-seconds", "0.5"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    for _ in range(100):
        try:
            urllib.request.urlopen("https://127.0.0.1:%d/redfish/v1/" % port, context=ctx, timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    return proc, "https://127.0.0.1:%d" % port, os.path.join(certs, "ca.pem")


def one_run(base, ca, state, auth="basic", want=None, user=USER, password=PASSWORD):
    """What the module does (plugins/modules/redfish_bios.py run()), without Ansible around it."""
    client = RedfishClient(base, user, password, ca_path=ca, auth=auth)
    started = time.perf_counter()
    bios = _bios.Bios(client)
    registry = bios.load_registry()
    translated, _res, unresolved = _bios.resolve_settings(want or WANT, registry, bios.vendor, bios.current)
    assert not unresolved, unresolved
    desired, _ = _bios.add_dependencies(bios.vendor, translated, registry, bios.dependencies, bios.current, bios.pending)
    _bios.validate(client.name, desired, registry, bios.current, bios.dependencies, bios.pending)
    if state == "verify":
        assert not _bios.verify(desired, bios.current, bios.pending)
    else:
        p = _bios.plan(desired, bios.current, bios.pending)
        if p["to_write"]:
            job = bios.write(p["to_write"])
            if bios.needs_job() and not job:
                bios.create_job()
    client.logout()
    return client.requests, time.perf_counter() - started


def captures(tmp, runs):
    realdata = os.path.join(os.path.dirname(REPO), "shared", "realdata", "redfish")
    folders = [(os.path.join(REPO, "tests", "fixtures", "redfish", f), f, w) for f, w in FIXTURE_WANT.items()]
    if os.path.isdir(realdata):
        folders[:0] = [(os.path.join(realdata, f), f, w) for f, w in CAPTURE_WANT.items()]
    else:
        print("(../shared/realdata absent: no real-capture figures)")
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "capture_server", os.path.join(REPO, "tests", "integration", "redfish", "captures", "conftest.py"))
    server_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server_mod)
    certs = os.path.join(tmp, "certs-4")
    if not os.path.exists(certs):
        subprocess.run([sys.executable, "-m", "lab.bmc.certs", "--dir", certs, "--user", USER, "--password", PASSWORD,
                        "--rounds", "4"], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    print("%-30s %-8s %9s %12s %10s" % ("capture", "run", "requests", "median ms", "registry"))
    for path, folder, want in folders:
        server = server_mod.Server(server_mod.Capture(path), certs)
        try:
            args = (server.baseurl, server.ca)
            kw = dict(want=want, user=server_mod.USER, password=server_mod.PASSWORD)
            size = len(server.capture.registry)
            reqs, secs = one_run(*args, state="present", **kw)
            print("%-30s %-8s %9d %12.1f %10s" % (folder, "write", reqs, secs * 1000, "%d attrs" % size))
            times = []
            for _ in range(runs):
                reqs, secs = one_run(*args, state="present", **kw)
                times.append(secs)
            print("%-30s %-8s %9d %12.1f" % (folder, "pending", reqs, statistics.median(times) * 1000))
        finally:
            server.stop()
    print()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--captures", action="store_true", help="only the captures and fixtures (no lab BMC)")
    args = parser.parse_args()
    if args.captures:
        with tempfile.TemporaryDirectory() as tmp:
            captures(tmp, args.runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        print("%-11s %-8s %9s %12s" % ("flavour", "run", "requests", "median ms"))
        for flavour in ("dell", "lenovo", "ami", "hpe", "supermicro"):
            proc, base, ca = start(tmp, flavour, flavour, 4)
            try:
                want = dict(WANT, snc="nps4") if flavour == "hpe" else WANT   # an AMD box: NPS, not SNC
                reqs, secs = one_run(base, ca, "present", want=want)
                print("%-11s %-8s %9d %12.1f" % (flavour, "write", reqs, secs * 1000))
                times = []
                for _ in range(args.runs):
                    reqs, secs = one_run(base, ca, "present", want=want)
                    times.append(secs)
                print("%-11s %-8s %9d %12.1f" % (flavour, "pending", reqs, statistics.median(times) * 1000))
                client = RedfishClient(base, USER, PASSWORD, ca_path=ca)
                path, system = client.find_system()
                power_cycle(client, path, system, poll_interval=0.1, wait_timeout=30)
                reqs, secs = one_run(base, ca, "verify", want=want)
                print("%-11s %-8s %9d %12.1f" % (flavour, "verify", reqs, secs * 1000))
            finally:
                proc.terminate()
                proc.wait(10)
        print()
        captures(tmp, args.runs)
        results = {}
        for rounds, auth in ((4, "basic"), (10, "basic"), (10, "session")):
            proc, base, ca = start(tmp, "lenovo", "auth-%d-%s" % (rounds, auth), rounds)
            try:
                one_run(base, ca, "present", auth)
                times = [one_run(base, ca, "present", auth)[1] for _ in range(args.runs)]
                results[(rounds, auth)] = statistics.median(times)
            finally:
                proc.terminate()
                proc.wait(10)
        base_t = results[(4, "basic")]
        for (rounds, auth), secs in results.items():
            print("bcrypt cost %2d, %-7s auth: %7.1f ms per run (x%.2f of cost 4 basic)" % (rounds, auth, secs * 1000, secs / base_t))


if __name__ == "__main__":
    main()
