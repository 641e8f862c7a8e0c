#!/usr/bin/python3
"""A twin's boot: render its hardware view under the hardware root (``/run/twin``), like firmware and
kernel would present it after a real boot. Runs inside the twin as twin-boot.service, before every
other service, at each container start (/run is a fresh tmpfs, so nothing of the last boot survives).

What the boot takes from where (only Debian's python3 + python3-yaml):
- the hardware model and the fault state: /etc/gpufleet-twin/twin.yml, written by ``lab up`` from the
  lab inventory (``{name, model, state: {...renderer state...}}``);
- BIOS: ``settings`` of the twin's BMC state, /run/twin-bmc/<name>/bios.json (pending values were
  made current by the BMC's reset; read-only bind mount of the BMC state dir);
- kernel release and cmdline: the default entry of /boot/grub/grub.cfg, as GRUB would boot it
  (``linux /boot/vmlinuz-6.1.0-26-amd64 root=UUID=... ro quiet`` ->
  ``BOOT_IMAGE=/boot/vmlinuz-6.1.0-26-amd64 root=UUID=... ro quiet``);
- loaded NVIDIA driver: the installed ``nvidia-driver-*`` package's upstream version (none: no module);
- a fresh boot id (the container shares the host kernel's, which never changes).
The renderer is the lead's lab/hw/render.py (the same code that makes the test fixture trees).
A summary of what was used is written to /run/twin-boot.json.
"""
import glob
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid

import yaml

LAB = os.environ.get("TWIN_LAB_DIR", "/opt/gpufleet-lab/lab")
CONFIG = os.environ.get("TWIN_CONFIG", "/etc/gpufleet-twin/twin.yml")
BMC_DIR = os.environ.get("TWIN_BMC_DIR", "/run/twin-bmc")
SYSROOT = os.environ.get("TWIN_SYSROOT", "/")
DEVICE_STATE = os.environ.get("TWIN_DEVICE_STATE", "/var/lib/gpufleet-twin/devices.json")
DEFAULT_ROOT = "/run/twin"
BIOS_KEYS = ("snc", "hyperthreading", "vtx", "vtd", "acs", "sriov")


class BootError(Exception):
    pass


def _path(*parts):
    return os.path.join(SYSROOT, *[p.lstrip("/") for p in parts])


def parse_grub_cfg(text):
    """Return (default, entries) of a grub.cfg. Entries: [{title, id, linux, children}] in file order.

    Sample (what update-grub writes)::

        set default="0"
        menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-UUID' {
            linux   /boot/vmlinuz-6.1.0-26-amd64 root=UUID=... ro  quiet
        }
        submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-UUID' {
            menuentry 'Debian GNU/Linux, with Linux 6.1.0-25-amd64' ... 'gnulinux-6.1.0-25-amd64-advanced-UUID' {
    """
    default = "0"
    top = []
    stack = [top]
    current = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("set default="):
            default = line[len("set default="):].strip().strip('"').strip("'")
        elif line.startswith(("menuentry ", "submenu ")):
            words = shlex.split(line.rstrip("{").strip())
            ident = None
            if "$menuentry_id_option" in words:
                position = words.index("$menuentry_id_option")
                ident = words[position + 1] if position + 1 < len(words) else None
            entry = {"title": words[1], "id": ident, "linux": None, "children": []}
            stack[-1].append(entry)
            stack.append(entry["children"])
            current.append(entry)
        elif line == "}":
            if len(stack) > 1:
                stack.pop()
                current.pop()
        elif line.startswith("linux") and current:
            parts = line.split(None, 1)
            if parts[0] in ("linux", "linuxefi"):
                current[-1]["linux"] = parts[1] if len(parts) > 1 else ""
    return default, top


def resolve_default(default, entries, grubenv=None):
    """The entry GRUB boots for ``default`` ("0", "saved", a title, an id, "1>2"); entry 0 when invalid."""
    if default == "saved":
        default = (grubenv or {}).get("saved_entry") or "0"
    level, chosen = entries, None
    for part in default.split(">"):
        found = None
        if part.isdigit():
            if int(part) < len(level):
                found = level[int(part)]
        else:
            found = next((e for e in level if part in (e["title"], e["id"])), None)
        if found is None:
            chosen = None
            break
        chosen, level = found, found["children"]
    if chosen is None or chosen["linux"] is None:
        chosen = entries[0] if entries else None
        while chosen is not None and chosen["linux"] is None and chosen["children"]:
            chosen = chosen["children"][0]
    return chosen


def kernel_from_grub():
    """(release, cmdline) of the default entry of /boot/grub/grub.cfg, or None when there is none."""
    cfg = _path("boot/grub/grub.cfg")
    if not os.path.exists(cfg):
        return None
    with open(cfg) as handle:
        default, entries = parse_grub_cfg(handle.read())
    grubenv = {}
    if os.path.exists(_path("boot/grub/grubenv")):
        with open(_path("boot/grub/grubenv")) as handle:
            for line in handle:
                key, sep, value = line.strip().partition("=")
                if sep and not key.startswith("#"):
                    grubenv[key] = value
    entry = resolve_default(default, entries, grubenv)
    if entry is None or not entry["linux"]:
        return None
    image, _, args = entry["linux"].partition(" ")
    release = os.path.basename(image)
    release = release[len("vmlinuz-"):] if release.startswith("vmlinuz-") else release
    # GRUB passes the arguments word by word: runs of blanks collapse to one.
    return release, " ".join(["BOOT_IMAGE=" + image] + args.split())


def installed_driver():
    """Upstream version of the installed nvidia-driver-* package ("550.90.07"), None when none is."""
    try:
        out = subprocess.run(["dpkg-query", "--admindir", _path("var/lib/dpkg"), "-W",
                              "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", "nvidia-driver-*"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise BootError("dpkg-query failed: %s" % exc)
    versions = []
    for line in out.splitlines():
        fields = line.split("\t")
        # db:Status-Abbrev: "ii " installed, "hi " installed and held; the second letter is the status.
        if len(fields) == 3 and fields[2][1:2] == "i":
            versions.append(fields[1].split(":")[-1].rsplit("-", 1)[0])
    return sorted(versions)[-1] if versions else None


def bios_settings(name):
    path = os.path.join(BMC_DIR, name, "bios.json")
    if not os.path.exists(path):
        return None, path
    try:
        with open(path) as handle:
            settings = json.load(handle)["settings"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BootError("BMC state %s unreadable: %s" % (path, exc))
    return {k: settings[k] for k in BIOS_KEYS if k in settings}, path


def os_release():
    out = {}
    with open(_path("etc/os-release")) as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep:
                out[key] = shlex.split(value)[0] if value else ""
    return out


# sysctl keys the rendered view models, applied at boot like systemd-sysctl does (the container's
# own /proc/sys is the host kernel's and read-only).
SYSCTL_FILES = {"kernel.numa_balancing": "proc/sys/kernel/numa_balancing"}


def boot_sysctl():
    """{key: value} that systemd-sysctl would apply at boot for the keys in SYSCTL_FILES.

    Files named *.conf in /usr/lib/sysctl.d, /run/sysctl.d and /etc/sysctl.d, a name in a later
    folder replacing the same name in an earlier one, read in name order, then /etc/sysctl.conf;
    the last assignment wins. Sample: ``kernel.numa_balancing = 0`` (also ``kernel/numa_balancing=0``).
    """
    files = {}
    for folder in ("usr/lib/sysctl.d", "run/sysctl.d", "etc/sysctl.d"):
        for path in glob.glob(os.path.join(_path(folder), "*.conf")):
            files[os.path.basename(path)] = path
    ordered = [files[name] for name in sorted(files)] + [_path("etc/sysctl.conf")]
    values = {}
    for path in ordered:
        try:
            with open(path) as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            key, sep, value = line.lstrip("-").partition("=")
            key = key.strip().replace("/", ".")
            if sep and key in SYSCTL_FILES:
                values[key] = value.strip()
    return values


def modules_loaded_at_boot(release, driver):
    """Driver modules systemd-modules-load would load: named in /etc/modules-load.d/*.conf (or
    /usr/lib/modules-load.d) and present for the booting kernel (a file under /lib/modules/<release>).
    Only the NVIDIA driver's optional modules (nvidia-peermem), and only with the driver loaded."""
    if not driver:
        return []
    wanted = set()
    for folder in ("usr/lib/modules-load.d", "etc/modules-load.d"):
        for path in glob.glob(os.path.join(_path(folder), "*.conf")):
            with open(path) as handle:
                wanted |= set(line.split("#")[0].strip().replace("-", "_") for line in handle if line.strip())
    out = []
    for name in sorted(wanted & {"nvidia_peermem"}):
        pattern = os.path.join(_path("lib/modules", release), "**", name.replace("_", "-") + ".ko*")
        if glob.glob(pattern, recursive=True):
            out.append(name)
    return out


def boot_devices():
    """What a reset does to the devices the lab's tool stand-ins changed (lab/repo/files/twin-devtools):
    burnt NIC firmware and committed NVMe firmware start running, mlxconfig Next Boot values become
    Current. Returns ({nic: running fw}, {nvme: running fw}) for the renderer; the state file is
    updated in place (it lives in the container, so it survives the reboot like flash does)."""
    path = _path(DEVICE_STATE)
    if not os.path.exists(path):
        return {}, {}
    try:
        with open(path) as handle:
            devices = json.load(handle)
    except (OSError, ValueError) as exc:
        raise BootError("device state %s unreadable: %s" % (path, exc))
    nic_fw, nvme_fw = {}, {}
    for name, entry in (devices.get("nics") or {}).items():
        entry["running"] = entry.get("burnt") or entry.get("running")
        for cfg in (entry.get("config") or {}).values():
            cfg["current"] = cfg.get("next_boot")
        nic_fw[name] = entry["running"]
    for name, entry in (devices.get("nvme") or {}).items():
        if entry.get("pending"):
            entry["running"], entry["pending"] = entry["pending"], None
        nvme_fw[name] = entry["running"]
    with open(path + ".tmp", "w") as handle:
        json.dump(devices, handle, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)
    return nic_fw, nvme_fw


def load_lab_module(name, folder="twin"):
    path = os.path.join(LAB, folder, name + ".py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("twin_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_renderer():
    module = load_lab_module("render", "hw")
    return module.render if module is not None else None


def minimal_view(state, dest):
    """Without the renderer (lab/hw/render.py absent): only what the boot itself decides."""
    files = {
        "proc/cmdline": state["kernel"]["cmdline"],
        "proc/sys/kernel/osrelease": state["kernel"]["release"],
        "proc/sys/kernel/random/boot_id": state["boot_id"],
    }
    version = (state.get("nvidia") or {}).get("driver_version")
    if version:
        files["sys/module/nvidia/version"] = version
        files["proc/driver/nvidia/version"] = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  "
                                               "(gpufleet lab twin)" % version)
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        with open(os.path.join(dest, rel), "w") as handle:
            handle.write(text + "\n")


def boot():
    with open(CONFIG) as handle:
        config = yaml.safe_load(handle) or {}
    name = config.get("name") or "twin"
    root = config.get("hardware_root") or DEFAULT_ROOT
    state = dict(config.get("state") or {})
    model_name = config.get("model") or "hgx-h100"
    model_path = os.path.join(LAB, "hw", "models", model_name + ".yml")

    bios, bios_path = bios_settings(name)
    if bios is not None:
        controls = config.get("bmc_controls")
        if controls is not None:
            bios = {k: v for k, v in bios.items() if k in controls}
        state["bios"] = dict(state.get("bios") or {}, **bios)
    kernel = kernel_from_grub()
    if kernel is not None:
        state["kernel"] = {"release": kernel[0], "cmdline": kernel[1]}
    else:
        state.setdefault("kernel", {"release": os.uname().release, "cmdline": "BOOT_IMAGE=/boot/vmlinuz ro quiet"})
    # nvidia_peermem is loaded by this boot only as systemd-modules-load would (modules_loaded_at_boot
    # below): the renderer's default (loaded with the driver) is for the fixture trees.
    state["nvidia"] = {"driver_version": installed_driver(), "peermem": False}
    state["boot_id"] = str(uuid.uuid4())
    nic_fw, nvme_fw = boot_devices()
    state["nic_firmware"] = dict(state.get("nic_firmware") or {}, **nic_fw)
    state["nvme_firmware"] = dict(state.get("nvme_firmware") or {}, **nvme_fw)
    state["os_release"] = os_release()

    tmp = root + ".new"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    render = load_renderer()
    if render is not None:
        if not os.path.exists(model_path):
            raise BootError("hardware model %s not found (twin.yml model: %s)" % (model_path, model_name))
        with open(model_path) as handle:
            model = yaml.safe_load(handle)
        devices = render(model, state, tmp)
        if model.get("netdev_attrs"):
            # RoCE rails as real interfaces (veth pairs to the leaves' ports), the view following them
            state["rails"] = [r["netdev"] for r in load_lab_module("rails").setup(devices, state, tmp)]
    else:
        print("twin-boot: %s/hw/render.py absent: minimal view only (cmdline, kernel, driver, boot id)"
              % LAB, file=sys.stderr)
        minimal_view(state, tmp)
    for module in modules_loaded_at_boot(state["kernel"]["release"], state["nvidia"]["driver_version"]):
        os.makedirs(os.path.join(tmp, "sys/module", module), exist_ok=True)
        with open(os.path.join(tmp, "sys/module", module, "version"), "w") as handle:
            handle.write(state["nvidia"]["driver_version"] + "\n")
        state.setdefault("modules_loaded", []).append(module)
    for key, value in sorted(boot_sysctl().items()):
        rel = os.path.join(tmp, SYSCTL_FILES[key])
        if os.path.exists(rel):
            os.chmod(rel, 0o644)
            with open(rel, "w") as handle:
                handle.write(value + "\n")
            state.setdefault("sysctl", {})[key] = value
    # OS files that readers take through the hardware root (the gate reads <root>/etc/default/grub and
    # grub.d/*.cfg): the twin's real ones, so a role's change shows without a re-render.
    for rel in ("etc/default", "etc/gpufleet"):      # etc/gpufleet: a golden image's manifest (image.json)
        if os.path.exists(_path(rel)) and not os.path.lexists(os.path.join(tmp, rel)):
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            os.symlink(_path(rel), os.path.join(tmp, rel))
    shutil.rmtree(root, ignore_errors=True)
    os.rename(tmp, root)
    summary = {"name": name, "model": model_name, "hardware_root": root, "renderer": render is not None,
               "bios_source": bios_path if bios is not None else None, "state": state}
    with open(os.path.join(os.path.dirname(root.rstrip("/")) or "/", "twin-boot.json"), "w") as handle:
        json.dump(summary, handle, indent=1, sort_keys=True)
    print("twin-boot: %s rendered under %s: kernel %s, driver %s, bios %s, cmdline %r" % (
        name, root, state["kernel"]["release"], state["nvidia"]["driver_version"], state.get("bios"),
        state["kernel"]["cmdline"]))


def main():
    try:
        boot()
    except (BootError, OSError, ValueError, yaml.YAMLError) as exc:
        print("twin-boot: failed: %s" % exc, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
