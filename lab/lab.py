"""The lab: node twins (podman + systemd) and their BMCs (sushy-emulator), from inventories/lab.

    lab/lab.sh up [twin ...]       build what is missing (image, apt repository, keys), start BMCs and twins
    lab/lab.sh down                stop and remove every twin and BMC of the lab: nothing left running or bound
    lab/lab.sh status              one line per twin: container, ssh port, BMC, boot id
    lab/lab.sh reboot NAME         restart a twin's container (a new boot: the twin re-renders its view)
    lab/lab.sh bmc-reset NAME      the BMC's reset hook: stop the twin, start it when the BMC's power is On
    lab/lab.sh oci-prestart        the twins' OCI prestart hook: pending BIOS applies at every boot (POST)
    lab/lab.sh import-image TARBALL REF   a golden image's root tarball (playbooks/image.yml) as a podman
                                   image a twin starts from (inventory: gpufleet_lab_twin.image: REF)

Everything the lab makes lives under lab/.state/ (git-ignored). Twins are podman containers named
``gpufleet-lab-<name>`` labelled ``gpufleet.lab``; nothing else on the machine is touched.
"""
import argparse
import concurrent.futures
import copy
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

import yaml

LAB = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(LAB)
STATE = os.environ.get("GPUFLEET_LAB_STATE", os.path.join(LAB, ".state"))
INVENTORY = os.environ.get("GPUFLEET_LAB_INVENTORY", os.path.join(REPO, "inventories", "lab", "hosts.yml"))
PREFIX = os.environ.get("GPUFLEET_LAB_PREFIX", "gpufleet-lab-")  # tests run a private lab beside the default one
LABEL = "gpufleet.lab"
BMC_USER, BMC_PASSWORD_VAR = "admin", "gpufleet_bmc_password"
HARDWARE_ROOT = "/run/twin"
# How long a BMC keeps the host off during a restart (sushy's own is a random 1-11 s).
BMC_RESET_SECONDS = 2
POWER_ON_WAIT = 30


class LabError(Exception):
    pass


def log(msg):
    print("lab: " + msg, flush=True)


def run(cmd, timeout=120, check=True, **kwargs):
    """Run a command (list), return CompletedProcess; a failure names the command and its stderr."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise LabError("%s: timed out after %d s" % (" ".join(cmd[:4]), timeout))
    if check and proc.returncode != 0:
        raise LabError("%s: exit %d: %s" % (" ".join(cmd[:6]), proc.returncode, (proc.stderr or proc.stdout).strip()[-1500:]))
    return proc


def podman(*args, **kwargs):
    return run(["podman"] + list(args), **kwargs)


# --- the inventory is the lab's configuration ----------------------------------------------------

def deep_merge(base, over):
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_twins(path=INVENTORY):
    """{name: spec} from the lab inventory: baseline deep-merged with each twin's overrides."""
    try:
        with open(path) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]
        group_vars = group.get("vars") or {}
        baseline = group_vars["gpufleet_lab_baseline"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise LabError("inventory %s: cannot read all.children.lab_twins with vars.gpufleet_lab_baseline: %s" % (path, exc))
    twins = {}
    for name, hostvars in (group.get("hosts") or {}).items():
        hostvars = hostvars or {}
        spec = deep_merge(baseline, hostvars.get("gpufleet_lab_twin") or {})
        spec["name"] = name
        if "ansible_port" not in hostvars:
            raise LabError("inventory %s: twin %s has no ansible_port (its loopback SSH port)" % (path, name))
        spec["ssh_port"] = int(hostvars["ansible_port"])
        spec.setdefault("bmc", {})
        spec["bmc_password"] = hostvars.get(BMC_PASSWORD_VAR, group_vars.get(BMC_PASSWORD_VAR))
        twins[name] = spec
    return twins


# --- things built once: ssh key, image, apt repository ---------------------------------------------

def ssh_key():
    key = os.path.join(STATE, "ssh", "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(os.path.dirname(key), exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-lab", "-f", key])
    return key


def image_ref():
    digest = hashlib.sha256()
    files = os.path.join(LAB, "image", "files")
    for path in [os.path.join(LAB, "image", "build.sh")] + sorted(os.path.join(files, n) for n in os.listdir(files)):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return "localhost/gpufleet-twin:" + digest.hexdigest()[:12]


def ensure_image():
    ref = image_ref()
    if podman("image", "exists", ref, check=False).returncode == 0:
        return ref, False
    log("building the twin image %s (debootstrap, about 1-2 minutes)" % ref)
    proc = subprocess.run(["bash", os.path.join(LAB, "image", "build.sh"), ref], timeout=900)
    if proc.returncode != 0:
        raise LabError("image build failed (lab/image/build.sh exit %d)" % proc.returncode)
    # Older twin images are dead weight (about 200 MB each); one still used by a container stays. A
    # test lab (its own prefix) leaves them: other checkouts' labs on this machine may boot from them.
    if PREFIX != "gpufleet-lab-":
        return ref, True
    old = podman("images", "--format", "{{.Repository}}:{{.Tag}}", "localhost/gpufleet-twin", check=False).stdout.split()
    for other in old:
        if other != ref:
            podman("rmi", other, check=False)
    return ref, True


def import_image(tarball, ref):
    """A root tarball (playbooks/image.yml ``image_export_path``) as the podman image ``ref``, booted
    like the twin image (systemd as PID 1). A twin whose inventory names ``image: REF`` starts from it."""
    containers_conf()
    t0 = time.time()
    podman("import", "-q", "--change", 'CMD ["/lib/systemd/systemd"]', "--change", "STOPSIGNAL=SIGRTMIN+3",
           tarball, ref, timeout=600)
    log("import-image: %s from %s in %.1f s" % (ref, tarball, time.time() - t0))


def ensure_repo():
    sys.path.insert(0, REPO)
    from lab.repo import build as repo_build
    dest = os.path.join(LAB, ".state", "repo")  # shared by every lab state dir: it only depends on the sources
    try:
        built = repo_build.build(dest)
    except RuntimeError as exc:
        raise LabError(str(exc))
    if built:
        log("apt repository built in %s" % dest)
    return dest


def containers_conf():
    """podman settings for this lab (runc, ulimits as TESTBED.md says) plus the twins' OCI hook.

    The prestart hook (``lab.sh oci-prestart``) runs on the host before every start of a twin, also
    the restarts podman's restart policy makes after an in-band reboot: it lets the BMC apply pending
    BIOS settings as a real server's POST does. Written under the state dir (absolute paths) and
    used for every podman call of this lab.
    """
    hooks = os.path.join(STATE, "hooks.d")
    os.makedirs(hooks, exist_ok=True)
    hook = {"version": "1.0.0",
            "hook": {"path": os.path.join(LAB, "lab.sh"), "args": ["lab.sh", "oci-prestart"], "timeout": 60,
                     "env": ["GPUFLEET_LAB_STATE=" + STATE, "GPUFLEET_LAB_INVENTORY=" + INVENTORY,
                             "GPUFLEET_LAB_PREFIX=" + PREFIX, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
            "when": {"annotations": {"^gpufleet\\.lab\\.state$": "^%s$" % re.escape(STATE)}},
            "stages": ["prestart"]}
    _write_json(os.path.join(hooks, "gpufleet-twin.json"), hook)
    conf = os.path.join(STATE, "containers.conf")
    text = ('# generated by lab/lab.py for the lab in %s\n[containers]\n'
            'default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\n\n'
            '[engine]\nruntime = "runc"\nhooks_dir = ["%s"]\n' % (STATE, hooks))
    if not os.path.exists(conf) or open(conf).read() != text:
        with open(conf, "w") as handle:
            handle.write(text)
    os.environ["CONTAINERS_CONF"] = conf
    return conf


# --- BMCs ---------------------------------------------------------------------------------------

def bmc_available():
    return os.path.exists(os.path.join(LAB, "bmc", "serve.py"))


def bmc_dir():
    return os.path.join(STATE, "bmc")


def _port_open(port):
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_port_free(port, seconds=15):
    """True once nothing listens on 127.0.0.1:port (a lab just torn down may take a moment to let go)."""
    deadline = time.time() + seconds
    while _port_open(port):
        if time.time() > deadline:
            return False
        time.sleep(0.3)
    return True


def raw_bios(flavour, settings):
    """Portable BIOS settings -> the flavour's raw attributes, from lab/bmc/flavours/<flavour>.yml.

    The flavour maps raw values to portable ones, e.g. (Dell)
    ``settings: {snc: {attribute: SubNumaCluster, map: {Disabled: "off", 4WayClustering: snc4}}, acs: {fixed: true}}``;
    the first raw value that maps to the wanted one is used. A setting the flavour cannot express fails.
    """
    path = os.path.join(LAB, "bmc", "flavours", flavour + ".yml")
    try:
        with open(path) as handle:
            mapping = (yaml.safe_load(handle) or {})["settings"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise LabError("BMC flavour %s: cannot read settings from %s: %s" % (flavour, path, exc))
    out = {}
    for key, value in sorted(settings.items()):
        entry = mapping.get(key)
        if entry is None:
            raise LabError("BMC flavour %s (%s): no portable setting %r" % (flavour, path, key))
        if "fixed" in entry:
            continue  # no BIOS attribute: the twin takes this one from the inventory (twin.yml state.bios)
        raw = next((r for r, portable in entry["map"].items() if portable == value), None)
        if raw is None:
            raise LabError("BMC flavour %s (%s): no value of %s for %s=%r (known: %s)" % (
                flavour, path, entry["attribute"], key, value, sorted(map(str, entry["map"].values()))))
        if entry["attribute"] in out and out[entry["attribute"]] != raw:
            raise LabError("BMC flavour %s: %s is one attribute (%s) for several settings; %r conflicts" % (
                flavour, key, entry["attribute"], value))
        out[entry["attribute"]] = raw
    return out


def write_bios_state(spec):
    """The twin's BIOS as the BMC starts with it: bios-initial.json for lab/bmc, or bios.json without it."""
    folder = os.path.join(bmc_dir(), spec["name"])
    os.makedirs(folder, exist_ok=True)
    for name in ("bios.json", "bios-initial.json"):
        if os.path.exists(os.path.join(folder, name)):
            os.unlink(os.path.join(folder, name))
    settings = spec.get("bios") or {}
    if bmc_available():
        _write_json(os.path.join(folder, "bios-initial.json"), raw_bios(spec["bmc"].get("flavour", "dell"), settings))
    else:
        _write_json(os.path.join(folder, "bios.json"), {"vendor": spec["bmc"].get("flavour"), "current": {},
                                                        "pending": {}, "settings": settings, "power": "On"})


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.rename(tmp, path)


def ensure_certs(password):
    certs = os.path.join(STATE, "bmc-certs")
    if not os.path.exists(os.path.join(certs, "ca.pem")):
        run([sys.executable, "-m", "lab.bmc.certs", "--dir", certs, "--user", BMC_USER, "--password", password], cwd=REPO)
    return certs


def _cert_paths(certs):
    """What `python -m lab.bmc.certs` writes: server.pem, server.key, htpasswd (and ca.pem for clients)."""
    paths = [os.path.join(certs, name) for name in ("server.pem", "server.key", "htpasswd")]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise LabError("BMC certs: %s missing (remove %s and run up again)" % (", ".join(missing), certs))
    return paths


def start_bmc(spec, certs):
    name, port = spec["name"], int(spec["bmc"]["port"])
    pidfile = os.path.join(bmc_dir(), name + ".pid")
    if _pid_alive(pidfile) and _port_open(port):
        return False
    if not _wait_port_free(port):
        raise LabError("BMC %s: 127.0.0.1:%d is already in use by another process" % (name, port))
    cert, key, htpasswd = _cert_paths(certs)
    hook = "%s bmc-reset" % shlex.quote(os.path.join(LAB, "lab.sh"))
    cmd = [sys.executable, "-m", "lab.bmc.serve", "--name", name, "--flavour", spec["bmc"].get("flavour", "dell"),
           "--port", str(port), "--state-dir", bmc_dir(), "--reset-hook", hook, "--reset-seconds", str(BMC_RESET_SECONDS),
           "--cert", cert, "--key", key, "--htpasswd", htpasswd]
    _write_json(os.path.join(bmc_dir(), name + ".cmd.json"), cmd)
    _spawn_bmc(name, cmd)
    return True


def _spawn_bmc(name, cmd):
    logf = open(os.path.join(bmc_dir(), name + ".log"), "ab")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    with open(os.path.join(bmc_dir(), name + ".pid"), "w") as handle:
        handle.write(str(proc.pid))


def _stop_bmc(name):
    pidfile = os.path.join(bmc_dir(), name + ".pid")
    pid = _pid_alive(pidfile)
    if pid:
        os.killpg(pid, signal.SIGTERM)  # its own session: the server and nothing else
        for _ in range(50):
            if not _pid_alive(pidfile):
                break
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
    if os.path.exists(pidfile):
        os.unlink(pidfile)
    return bool(pid)


def oci_prestart(stdin_text):
    """OCI prestart hook of a twin (host side, before its init starts): the host is about to POST.

    A real server applies pending BIOS settings at every POST, an OS reboot included; the BMC twin
    applies them only on a Redfish reset. So when the twin's BMC holds pending settings, the BMC is
    stopped, its own model applies the reset (Dell: only through a scheduled job), and it is started
    again with the same command: its Redfish view and bios.json agree, and the boot reads the result.
    Never calls podman (the container's lock is held) and never fails the start: errors go to the log.
    """
    name = (json.loads(stdin_text).get("annotations") or {}).get("gpufleet.lab.twin")
    if not name or not bmc_available():
        return
    path = os.path.join(bmc_dir(), name, "bios.json")
    try:
        with open(path) as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return
    if not state.get("pending") or state.get("power") != "On":
        return
    sys.path.insert(0, REPO)
    from lab.bmc import model
    flavour = model.load_flavour(state["vendor"])
    if flavour.get("config_job"):
        try:
            with open(os.path.join(bmc_dir(), name, "jobs.json")) as handle:
                jobs = json.load(handle)
        except (OSError, ValueError):
            jobs = {}
        if not any(j.get("JobState") == "Scheduled" for j in jobs.values()):
            return  # Dell: pending values without a BIOS config job stay pending across a POST
    with open(os.path.join(bmc_dir(), name + ".cmd.json")) as handle:
        cmd = json.load(handle)
    port = int(cmd[cmd.index("--port") + 1])
    _stop_bmc(name)
    bios = model.BiosModel(flavour, bmc_dir(), name)
    bios.reset("GracefulRestart", "On")
    _spawn_bmc(name, cmd)
    deadline = time.time() + 30
    while time.time() < deadline and not _port_open(port):
        time.sleep(0.2)
    log("oci-prestart: %s POST: BMC applied pending BIOS (now pending: %s)" % (name, bios.pending or "none"))


def wait_bmc(spec, deadline):
    port = int(spec["bmc"]["port"])
    while time.time() < deadline:
        if _port_open(port):
            return
        time.sleep(0.2)
    raise LabError("BMC %s: nothing answers on 127.0.0.1:%d (log: %s)" % (
        spec["name"], port, os.path.join(bmc_dir(), spec["name"] + ".log")))


def _pid_alive(pidfile):
    """The pid in ``pidfile`` if that process is still a BMC this lab started (never a reused pid)."""
    try:
        with open(pidfile) as handle:
            pid = int(handle.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    if b"lab.bmc.serve" not in cmdline or bmc_dir().encode() not in cmdline:
        return None
    return pid


def stop_bmcs():
    stopped = []
    folder = bmc_dir()
    if not os.path.isdir(folder):
        return stopped
    for name in sorted(os.listdir(folder)):
        if name.endswith(".pid") and _stop_bmc(name[:-4]):
            stopped.append(name[:-4])
    return stopped


# --- the fabric the twins' ibnetdiscover shows -----------------------------------------------------

def fabric_dir():
    path = os.path.join(STATE, "fabric")
    os.makedirs(path, exist_ok=True)
    return path


def fabric_capture():
    """Write <state>/fabric/ibnetdiscover.out: the lab's InfiniBand fabric, for the twins' ibnetdiscover.

    Made by the fabric tests' generator (lab/fabric/lab_capture.py) from what the twins
    are rendered from: inventory cabling + hardware models. Rewritten only when those change.
    """
    script = os.path.join(REPO, "lab", "fabric", "lab_capture.py")
    out = os.path.join(fabric_dir(), "ibnetdiscover.out")
    if not os.path.exists(script):
        return "not written: %s is absent (ibnetdiscover in the twins will fail)" % script
    digest = hashlib.sha256()
    models = os.path.join(LAB, "hw", "models")
    for path in [INVENTORY, script, os.path.join(LAB, "hw", "render.py")] + sorted(
            os.path.join(models, n) for n in os.listdir(models)):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    stamp = os.path.join(fabric_dir(), ".stamp")
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == digest.hexdigest():
        return "up to date"
    proc = run([sys.executable, script, out + ".new", "--inventory", INVENTORY], check=False, timeout=300, cwd=REPO)
    if proc.returncode != 0:
        return "not written: %s failed: %s" % (script, (proc.stderr or proc.stdout).strip()[-500:])
    os.replace(out + ".new", out)
    with open(stamp, "w") as handle:
        handle.write(digest.hexdigest())
    return "written (%s)" % out


# --- twins --------------------------------------------------------------------------------------

def container(name):
    return PREFIX + name


def bmc_controls(flavour):
    """Portable BIOS settings the flavour's BMC really switches (Dell/HPE have no ACS attribute)."""
    if not bmc_available():
        return None
    path = os.path.join(LAB, "bmc", "flavours", flavour + ".yml")
    with open(path) as handle:
        mapping = (yaml.safe_load(handle) or {}).get("settings") or {}
    return sorted(k for k, v in mapping.items() if "fixed" not in (v or {}))


def twin_yml(spec):
    """/etc/gpufleet-twin/twin.yml: what the twin's boot (lab/twin/boot.py) takes from the inventory."""
    names = sorted(load_twins()) if os.path.exists(INVENTORY) else [spec["name"]]
    state = dict(spec.get("state") or {})
    state.setdefault("hostname", spec["name"])
    # LIDs unique across the lab's fabric: 100 per twin.
    state.setdefault("first_lid", 1 + 100 * (names.index(spec["name"]) if spec["name"] in names else 0))
    # BIOS settings the BMC does not switch come from the inventory (the BMC's value wins for the others).
    state["bios"] = dict(spec.get("bios") or {}, **(state.get("bios") or {}))
    return {"name": spec["name"], "model": spec.get("model", "hgx-h100"), "hardware_root": HARDWARE_ROOT,
            "bmc_controls": bmc_controls(spec["bmc"].get("flavour", "dell")), "state": state}


def twin_config(spec):
    folder = os.path.join(STATE, "twins", spec["name"])
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "twin.yml"), "w") as handle:
        yaml.safe_dump(twin_yml(spec), handle, sort_keys=True)
    with open(ssh_key() + ".pub") as src, open(os.path.join(folder, "authorized_keys"), "w") as dst:
        dst.write(src.read())
    return folder


def seed_script(spec):
    """Shell run once in a new twin: the OS-side state of the inventory (packages, holds, GRUB, units)."""
    grub = spec.get("grub") or {}
    # Seeding overlaps the first boot, whose systemd-tmpfiles-setup empties /tmp ("D /tmp"): apt's
    # /tmp/apt-dpkg-install-* vanished under dpkg now and then. /var/tmp is never emptied at boot.
    lines = ["set -eu", "export DEBIAN_FRONTEND=noninteractive TMPDIR=/var/tmp",
             "apt-get update -qq -o Dpkg::Use-Pty=0"]
    if spec.get("image"):
        # A twin started from a golden image (lab.sh import-image): its packages, holds, GRUB files and
        # units are the image's; only the hardware faults (BIOS, state) come from the inventory.
        return "\n".join(lines + ["mkdir -p /var/lib/gpufleet-twin && date -u +%FT%TZ >/var/lib/gpufleet-twin/seeded"]) + "\n"
    if spec.get("packages"):
        lines.append("apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends --allow-downgrades "
                     + " ".join(shlex.quote(p) for p in spec["packages"]) + " >/dev/null")
    if spec.get("holds"):
        lines.append("apt-mark hold " + " ".join(shlex.quote(p) for p in spec["holds"]) + " >/dev/null")
    for var, key in (("GRUB_CMDLINE_LINUX", "cmdline_linux"), ("GRUB_CMDLINE_LINUX_DEFAULT", "cmdline_linux_default")):
        if key in grub:
            value = (grub[key] or "").replace("\\", "\\\\").replace("#", "\\#").replace("&", "\\&")
            lines.append("sed -i 's#^%s=.*#%s=\"%s\"#' /etc/default/grub" % (var, var, value))
    for fname, text in sorted((grub.get("dropins") or {}).items()):
        if "/" in fname or not fname.endswith(".cfg"):
            raise LabError("twin %s: grub drop-in %r must be a plain *.cfg name" % (spec["name"], fname))
        lines.append("cat >/etc/default/grub.d/%s <<'GPUFLEET_EOF'\n%s\nGPUFLEET_EOF" % (fname, text.rstrip("\n")))
    lines.append("update-grub 2>/dev/null")
    for unit in spec.get("services") or []:
        lines.append("systemctl enable %s 2>/dev/null" % shlex.quote(unit))
    lines.append("mkdir -p /var/lib/gpufleet-twin && date -u +%FT%TZ >/var/lib/gpufleet-twin/seeded")
    return "\n".join(lines) + "\n"


def container_state(name):
    proc = podman("inspect", "-f", "{{.State.Status}}", container(name), check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def model_spec(spec):
    """The twin's hardware model (lab/hw/models/<model>.yml)."""
    path = os.path.join(LAB, "hw", "models", spec.get("model", "hgx-h100") + ".yml")
    try:
        with open(path) as handle:
            return yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise LabError("twin %s: hardware model %s: %s" % (spec["name"], path, exc))


def network_options(spec):
    """slirp4netns: a network namespace of its own, one loopback port forwarded, no host firewall rules.
    A RoCE model (``netdev_attrs``) also gets CAP_NET_ADMIN in that namespace: its boot makes the rails
    as real interfaces (lab/twin/rails.py) and the roce role's ``ip`` changes them."""
    options = ["--network", "slirp4netns:port_handler=slirp4netns", "-p", "127.0.0.1:%d:22" % spec["ssh_port"]]
    if model_spec(spec).get("netdev_attrs"):
        options += ["--cap-add", "NET_ADMIN"]
    return options


def create_twin(spec, ref):
    name = spec["name"]
    folder = twin_config(spec)
    podman("run", "-d", "--name", container(name), "--hostname", name, "--label", "%s=%s" % (LABEL, name),
           "--label", "%s.prefix=%s" % (LABEL, PREFIX),
           "--annotation", "gpufleet.lab.twin=" + name, "--annotation", "gpufleet.lab.state=" + STATE,
           "--systemd=always", "--restart=always",
           *network_options(spec),
           "-v", "%s:/opt/gpufleet-lab/lab:ro" % LAB,
           "-v", "%s:/srv/gpufleet-repo:ro" % ensure_repo(),
           "-v", "%s:/etc/gpufleet-twin:ro" % folder,
           "-v", "%s:/run/twin-bmc:ro" % bmc_dir(),
           "-v", "%s:/run/twin-fabric:ro" % fabric_dir(),
           spec.get("image") or ref, timeout=120)


def wait_booted(name, deadline):
    """Until systemd inside reports running/degraded and the hardware view is rendered."""
    last = ""
    while time.time() < deadline:
        proc = podman("exec", container(name), "systemctl", "is-system-running", check=False, timeout=20)
        last = proc.stdout.strip()
        if last in ("running", "degraded"):
            boot = podman("exec", container(name), "systemctl", "is-active", "twin-boot.service", check=False, timeout=20)
            if boot.stdout.strip() == "active":
                return last
            if boot.stdout.strip() == "failed":
                journal = podman("exec", container(name), "journalctl", "-b", "-u", "twin-boot", "-o", "cat", "--no-pager",
                                 check=False, timeout=20).stdout
                raise LabError("twin %s: twin-boot.service failed: %s" % (name, journal.strip()[-1500:]))
        time.sleep(0.3)
    raise LabError("twin %s: not booted in time (systemctl is-system-running: %r)" % (name, last))


def wait_ssh(spec, deadline):
    while time.time() < deadline:
        proc = run(ssh_command(spec) + ["cat", HARDWARE_ROOT + "/proc/sys/kernel/random/boot_id"], check=False, timeout=15)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
        time.sleep(0.3)
    raise LabError("twin %s: no SSH on 127.0.0.1:%d" % (spec["name"], spec["ssh_port"]))


def ssh_command(spec):
    return ["ssh", "-i", ssh_key(), "-p", str(spec["ssh_port"]), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=5", "root@127.0.0.1"]


def up_twin(spec, ref):
    """Create (or start) one twin; a new one is seeded, then rebooted so it boots as that node."""
    name, t0 = spec["name"], time.time()
    state = container_state(name)
    if state == "running":
        return "running"
    if state is not None:
        podman("start", container(name))
        wait_booted(name, time.time() + 60)
        wait_ssh(spec, time.time() + 30)
        return "started"
    if not _wait_port_free(spec["ssh_port"]):
        raise LabError("twin %s: 127.0.0.1:%d (its SSH port) is already in use by another process" % (name, spec["ssh_port"]))
    create_twin(spec, ref)
    # Seeding needs no running systemd (apt, update-grub, `systemctl enable` work offline): it runs while
    # the first boot is under way, and the restart below is the boot that counts.
    t1 = time.time()
    proc = subprocess.run(["podman", "exec", "-i", container(name), "bash", "-s"], input=seed_script(spec),
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise LabError("twin %s: seeding failed (exit %d): %s" % (name, proc.returncode, (proc.stderr + proc.stdout).strip()[-2000:]))
    t2 = time.time()
    podman("restart", "-t", "10", container(name), timeout=60)
    wait_booted(name, time.time() + 60)
    wait_ssh(spec, time.time() + 30)
    t3 = time.time()
    return "created in %.1f s (create %.1f s, seed %.1f s, boot %.1f s)" % (t3 - t0, t1 - t0, t2 - t1, t3 - t2)


def up(names=None):
    t0 = time.time()
    containers_conf()
    twins = load_twins()
    selected = [twins[n] for n in (names or sorted(twins)) if n in twins]
    unknown = sorted(set(names or []) - set(twins))
    if unknown:
        raise LabError("no twin named %s in %s (known: %s)" % (", ".join(unknown), INVENTORY, ", ".join(sorted(twins))))
    if os.geteuid() != 0:
        raise LabError("the lab needs root: rootful podman (systemd containers with runc) and debootstrap")
    for tool in ("podman", "runc", "slirp4netns", "ssh", "ssh-keygen", "debootstrap", "equivs-build", "dpkg-scanpackages"):
        if not shutil.which(tool):
            raise LabError("%s not found: run `make deps` (podman runc slirp4netns debootstrap equivs dpkg-dev "
                           "openssh-client)" % tool)
    ssh_key()
    ref, _ = ensure_image()
    ensure_repo()
    os.makedirs(bmc_dir(), exist_ok=True)
    fresh = [s for s in selected if container_state(s["name"]) is None]
    for spec in fresh:
        write_bios_state(spec)
    if bmc_available():
        password = next((s["bmc_password"] for s in selected if s.get("bmc_password")), "gpufleet-lab")
        certs = ensure_certs(password)
        for spec in selected:
            start_bmc(spec, certs)
        for spec in selected:
            wait_bmc(spec, time.time() + 30)
    else:
        log("lab/bmc is absent: twins boot with the BIOS state written in %s, no Redfish BMC" % bmc_dir())
    with concurrent.futures.ThreadPoolExecutor(max(1, len(selected)) + 1) as pool:
        fabric = pool.submit(fabric_capture)
        results = dict(zip([s["name"] for s in selected], pool.map(lambda s: _safe(up_twin, s, ref), selected)))
        log("fabric capture: %s" % fabric.result())
    failed = {n: r for n, r in results.items() if isinstance(r, Exception)}
    for name in sorted(results):
        log("%s: %s" % (name, results[name]))
    if failed:
        raise LabError("; ".join(str(e) for e in failed.values()))
    log("up: %d twins in %.1f s" % (len(selected), time.time() - t0))


def _safe(func, *args):
    try:
        return func(*args)
    except (LabError, subprocess.SubprocessError, OSError) as exc:
        return exc if isinstance(exc, LabError) else LabError(str(exc))


def our_containers():
    """This lab's twins: labelled with our prefix. A name test alone is not enough: the test labs'
    prefixes extend each other (gpufleet-labtest-, gpufleet-labtest-prov-), and a lab going down
    took the parallel labs' twins with it."""
    proc = podman("ps", "-a", "--filter", "label=%s.prefix=%s" % (LABEL, PREFIX), "--format", "{{.Names}}",
                  check=False)
    return [n for n in proc.stdout.split() if n.startswith(PREFIX)]


def down():
    containers_conf()
    names = our_containers()
    if names:
        podman("rm", "-f", "-t", "5", *names, timeout=120)
    bmcs = stop_bmcs()
    log("down: removed %d twins (%s), stopped %d BMCs" % (len(names), ", ".join(names) or "-", len(bmcs)))


def reboot(name):
    """Restart one twin's container; its boot re-renders the view. Used by the BMC's reset hook."""
    containers_conf()
    if container_state(name) is None:
        raise LabError("reboot: no twin container %s" % container(name))
    podman("restart", "-t", "10", container(name), timeout=60)
    log("reboot: %s restarted" % name)


def bmc_power(name):
    try:
        with open(os.path.join(bmc_dir(), name, "bios.json")) as handle:
            return json.load(handle).get("power")
    except (OSError, ValueError):
        return None


def bmc_reset(name):
    """The BMC's reset hook: the host goes down now and boots when the BMC powers it on again.

    ForceRestart/GracefulRestart: the BMC shows power Off for a moment, then On -> the twin is stopped,
    then started (a new boot, pending BIOS now current). ForceOff: power stays Off -> the twin stays
    stopped (SSH refused, like a powered-off node) until a later reset (On) runs this hook again.
    """
    containers_conf()
    state = container_state(name)
    if state is None:
        raise LabError("bmc-reset: no twin container %s" % container(name))
    if state == "running":
        podman("stop", "-t", "5", container(name), timeout=60)
    # The BMC's power settles BMC_RESET_SECONDS after the reset (restart: Off then On; ForceOff: Off).
    time.sleep(BMC_RESET_SECONDS + 1)
    deadline = time.time() + POWER_ON_WAIT
    while time.time() < deadline:
        if bmc_power(name) in ("On", None):
            podman("start", container(name), timeout=60)
            log("bmc-reset: %s powered on (new boot)" % name)
            return
        time.sleep(0.5)
    log("bmc-reset: %s stays powered off (BMC power Off)" % name)


def status():
    containers_conf()
    twins = load_twins()
    rows = []
    for name, spec in sorted(twins.items()):
        state = container_state(name) or "absent"
        boot_id = "-"
        if state == "running":
            proc = podman("exec", container(name), "cat", HARDWARE_ROOT + "/proc/sys/kernel/random/boot_id", check=False)
            boot_id = proc.stdout.strip() or "-"
        port = spec["bmc"].get("port")
        bmc = "up" if port and _pid_alive(os.path.join(bmc_dir(), name + ".pid")) and _port_open(int(port)) else "down"
        rows.append("%-8s %-9s ssh 127.0.0.1:%-5d bmc %s %-4s boot_id %s" % (
            name, state, spec["ssh_port"], "https://127.0.0.1:%s" % port if port else "-", bmc, boot_id))
    print("\n".join(rows))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lab.sh", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("twins", nargs="*")
    sub.add_parser("down")
    sub.add_parser("status")
    p_reboot = sub.add_parser("reboot")
    p_reboot.add_argument("name")
    p_reset = sub.add_parser("bmc-reset", help="reset hook of the twin's BMC (power follows the BMC)")
    p_reset.add_argument("name")
    sub.add_parser("oci-prestart", help="OCI prestart hook of a twin (reads the container state on stdin)")
    p_import = sub.add_parser("import-image", help="a golden image's root tarball as a podman image for twins")
    p_import.add_argument("tarball")
    p_import.add_argument("ref")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.twins)
        elif args.command == "down":
            down()
        elif args.command == "status":
            status()
        elif args.command == "import-image":
            import_image(args.tarball, args.ref)
        elif args.command == "bmc-reset":
            bmc_reset(args.name)
        elif args.command == "oci-prestart":
            # runc waits on the hook's output pipes: keep them quiet, log to the state dir instead
            os.makedirs(bmc_dir(), exist_ok=True)
            sys.stdout = sys.stderr = open(os.path.join(bmc_dir(), "oci-prestart.log"), "a")
            try:
                oci_prestart(sys.stdin.read())
            except Exception as exc:  # noqa: BLE001  a hook must never stop the twin from starting
                print("lab: oci-prestart: %s: %s" % (type(exc).__name__, exc), file=sys.stderr)
            return 0
        else:
            reboot(args.name)
    except LabError as exc:
        print("lab: error: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
