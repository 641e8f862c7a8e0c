# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state of the NVIDIA driver, fabric manager, OFED and held packages (see _desired/registry.py).

Package names are what the roles *ask for*; ``package_pins`` resolves them against the node's own
repositories (an upstream version matches any revision; a virtual name resolves to its provider: from
R580, CUDA's ``nvidia-fabricmanager-580`` is provided by the unversioned ``nvidia-fabricmanager``).

For the gate's checks (the integrator wires them; the check keeps its own data handling):
- ``nvidia.driver``        -> ``driver_expected(profile)``
- ``nvidia.fabricmanager`` -> ``fabricmanager_expected(profile, nvswitch_present)``
- ``packages.held``        -> ``held_expected(profile, os_family, nvswitch_present)``
- ``ofed.version``         -> ``ofed_expected(profile)``
- ``ofed.kernel_match``    -> ``ofed_kernel_expected(profile, running_release)``
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._desired.registry import AREAS, DesiredError, area

FLAVORS = ("server", "open", "server-open")
# GPU generations whose NVSwitch fabric needs the NVLink subnet manager (nvlsm) beside fabric manager.
NVLSM_MODELS = ("B200", "B300", "GB200", "GB300")
DEBIAN_FAMILY = ("debian", "ubuntu")


def _section(profile, name):
    value = (profile or {}).get(name)
    return value if isinstance(value, dict) else {}


def _family(os_family, profile):
    family = (os_family or (_section(profile, "os").get("id")) or "ubuntu").lower()
    return "debian" if family in DEBIAN_FAMILY else "redhat"


def branch_of(version):
    """``550.90.07`` -> ``550``; anything else is an error naming the key."""
    match = re.match(r"^(\d{3,})\.\d+(\.\d+)?$", str(version))
    if not match:
        raise DesiredError("nvidia.driver_version: %r is not an NVIDIA driver version (like 550.90.07)" % (version,))
    return match.group(1)


def _pin(name, version, replaces=()):
    return {"name": name, "version": version, "replaces": list(replaces)}


def driver_expected(profile):
    """The driver version ``nvidia.driver`` expects loaded (None: not in profile)."""
    return _section(profile, "nvidia").get("driver_version")


def fabricmanager_expected(profile, nvswitch_present=None):
    """{"required": bool or None (unknown: no NVSwitch data), "version": the driver's version}."""
    wanted = _section(profile, "nvidia").get("fabricmanager")
    required = wanted if wanted is not None else nvswitch_present
    return {"required": None if required is None else bool(required), "version": driver_expected(profile)}


def nvlsm_expected(profile, nvswitch_present=None):
    """nvlsm wanted: the profile's ``nvidia.nvlsm``, else B200/B300-class GPUs with NVSwitches."""
    wanted = _section(profile, "nvidia").get("nvlsm")
    if wanted is not None:
        return bool(wanted)
    model = str(_section(profile, "gpu").get("model") or "").upper()
    return bool(nvswitch_present is not False and any(m in model for m in NVLSM_MODELS))


@area("nvidia_driver")
def nvidia_driver(profile, os_family=None, kernel_release=None, nvswitch_present=None, **_):
    """What the nvidia_driver role installs, or None when the profile pins no driver.

    ``kernel_release``: the kernel that will boot (default the profile's ``kernel.release``): the
    precompiled module package is per kernel, DKMS builds for it through its headers.
    """
    nv = _section(profile, "nvidia")
    version = nv.get("driver_version")
    if not version:
        return None
    branch = branch_of(version)
    flavor = nv.get("flavor") or "server"
    if flavor not in FLAVORS:
        raise DesiredError("nvidia.flavor: %r (known: %s)" % (flavor, ", ".join(FLAVORS)))
    kernel = kernel_release or _section(profile, "kernel").get("release")
    fm = fabricmanager_expected(profile, nvswitch_present)
    if _family(os_family, profile) == "debian":
        out = {
            "driver": _pin("nvidia-driver-%s-%s" % (branch, flavor), version, ["nvidia-driver-[0-9]*"]),
            # Ubuntu's signed precompiled modules, one package per driver branch and kernel; their
            # version is the kernel's, so no version is pinned: the driver's own version is verified
            # in the module (modinfo) after the install.
            "precompiled": _pin("linux-modules-nvidia-%s-%s-%s" % (branch, flavor, kernel), None,
                                ["linux-modules-nvidia-[0-9]*-%s" % kernel]) if kernel else None,
            "dkms": _pin("nvidia-dkms-%s-%s" % (branch, flavor), version, ["nvidia-dkms-[0-9]*"]),
            "fabricmanager": _pin("nvidia-fabricmanager-%s" % branch, version,
                                  ["nvidia-fabricmanager", "nvidia-fabricmanager-[0-9]*"]),
            "imex": _pin("nvidia-imex-%s" % branch, version, ["nvidia-imex", "nvidia-imex-[0-9]*"]),
            "nvlsm": _pin("nvlsm", None),
        }
    else:
        # CUDA's RHEL repository: unversioned names, the branch lives in the version (3:550.90.07-1.el9)
        module = "kmod-nvidia-open-dkms" if "open" in flavor else "kmod-nvidia-latest-dkms"
        out = {
            "driver": _pin("nvidia-driver", version),
            "precompiled": None,
            "dkms": _pin(module, version, ["kmod-nvidia-*"]),
            "fabricmanager": _pin("nvidia-fabric-manager", version),
            "imex": _pin("nvidia-imex", version),
            "nvlsm": _pin("nvlsm", None),
        }
    out.update({
        "version": version, "branch": branch, "flavor": flavor, "kernel": kernel,
        "fabricmanager_required": fm["required"],
        "imex_required": bool(nv.get("imex")),
        "nvlsm_required": nvlsm_expected(profile, nvswitch_present),
        "peermem": nv.get("peermem") is not False,
        "persistenced": nv.get("persistenced") is not False,
    })
    return out


def ofed_package_version(release):
    """MLNX_OFED/DOCA-OFED release -> the version pattern of its ``mlnx-ofed-kernel`` packages:
    ``23.10-1.1.9.0`` -> ``23.10.OFED.23.10.1.1.9.*`` (the archive names ``23.10.OFED.23.10.1.1.9.1-1``)."""
    match = re.match(r"^(\d+\.\d+)-(\d+\.\d+\.\d+)(\.\d+)?$", str(release))
    if not match:
        raise DesiredError("ofed.version: %r is not an OFED release (like 23.10-1.1.9.0, as ofed_info -s prints it)"
                           % (release,))
    return "%s.OFED.%s.%s.*" % (match.group(1), match.group(1), match.group(2))


def ofed_expected(profile):
    """The release ``ofed.version`` expects from ``ofed_info -s`` (None: not in profile)."""
    return _section(profile, "ofed").get("version")


def ofed_kernel_expected(profile, running_release=None):
    """The kernel ``ofed.kernel_match`` compares mlx5_core's vermagic with: the one the profile pins
    (the kernel that will boot, so a role's verify before the reboot checks the next boot's modules),
    else the running one. None when the check is off (``ofed.kernel_match: false``)."""
    ofed = _section(profile, "ofed")
    if ofed.get("kernel_match") is False:
        return None
    return _section(profile, "kernel").get("release") or running_release


@area("ofed")
def ofed(profile, os_family=None, kernel_release=None, **_):
    """What the ofed role installs, or None when the profile pins no OFED release."""
    section = _section(profile, "ofed")
    release = section.get("version")
    if not release:
        return None
    distribution = section.get("distribution") or "mlnx_ofed"
    if distribution not in ("mlnx_ofed", "doca_ofed"):
        raise DesiredError("ofed.distribution: %r (known: mlnx_ofed, doca_ofed)" % (distribution,))
    pattern = ofed_package_version(release)
    if _family(os_family, profile) == "debian":
        packages = [_pin("mlnx-ofed-kernel-utils", pattern), _pin("mlnx-ofed-kernel-dkms", pattern)]
    else:
        packages = [_pin("mlnx-ofed-kernel", pattern), _pin("kmod-mlnx-ofed-kernel", pattern)]
    if distribution == "doca_ofed":
        # the meta package; its own version numbers differ from the release: the one the repository has
        packages.append(_pin("doca-ofed", None))
    return {"release": release, "distribution": distribution, "packages": packages,
            "kernel": kernel_release or _section(profile, "kernel").get("release"),
            "kernel_match": section.get("kernel_match") is not False}


def pinned_names(profile, os_family=None, nvswitch_present=None):
    """Names the driver and OFED roles pin and hold (as asked; the repository may resolve a virtual name)."""
    names = []
    drv = nvidia_driver(profile, os_family=os_family, nvswitch_present=nvswitch_present)
    if drv:
        names.append(drv["driver"]["name"])
        if drv["fabricmanager_required"]:
            names.append(drv["fabricmanager"]["name"])
        if drv["imex_required"]:
            names.append(drv["imex"]["name"])
        if drv["nvlsm_required"]:
            names.append(drv["nvlsm"]["name"])
    off = ofed(profile, os_family=os_family)
    if off:
        names += [p["name"] for p in off["packages"]]
    return names


@area("held_packages")
def held_packages(profile, os_family=None, nvswitch_present=None, **context):
    """Every package the gate's ``packages.held`` expects held: the profile's ``packages.held``, the
    driver and OFED pins, and the kernel's (area ``kernel_packages`` of part 1, when registered).

    A fabric manager asked for as ``nvidia-fabricmanager-<branch>`` from R580 is installed as the
    unversioned ``nvidia-fabricmanager``: both names are given as one pattern, so the check counts the
    package the repository resolved."""
    out = list(_section(profile, "packages").get("held") or [])
    for name in pinned_names(profile, os_family, nvswitch_present):
        match = re.match(r"^nvidia-(fabricmanager|imex)-(\d+)$", name)
        if match and int(match.group(2)) >= 580:
            name = "nvidia-%s*" % match.group(1)
        if name not in out:
            out.append(name)
    if "kernel_packages" in AREAS:
        # kernel_packages (part 1) names OS families as Ansible does: Debian, RedHat
        family = "Debian" if _family(os_family, profile) == "debian" else "RedHat"
        kernel = AREAS["kernel_packages"](profile, os_family=family, **context) or []
        for item in kernel:
            name = item.get("name") if isinstance(item, dict) else item
            if name and name not in out:
                out.append(name)
    return out


def held_expected(profile, os_family=None, nvswitch_present=None):
    """``packages.held``'s list (names or fnmatch patterns)."""
    return held_packages(profile, os_family=os_family, nvswitch_present=nvswitch_present)
