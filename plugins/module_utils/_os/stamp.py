# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converged stamp: what a node looked like at the end of its last green provisioning run
(docs/roles.md section 6, "A converged node").

A converged re-run of provision.yml must cost about a gate, not the whole washing machine. The stamp
makes that safe: provision.yml's gate writes it on a green node after the washing machine ran, and
the next run skips the washing machine only when all of these still hold on the node:

- the desired state is the same (``desired``: a digest the controller makes of the profile, the role
  variables and the collection's own files, filter ``desired_digest``);
- nothing provisioning writes or reads to decide has moved since (``files``: path, type, size,
  mtime and mode of every file under ``MANAGED`` and under the paths role variables moved elsewhere,
  ``managed_paths``; no content is read, so the check costs stats only);
- the node has not booted since (``boot``: boot id and kernel release, read through the hardware root):
  a boot is where BIOS, kernel and command-line changes land, and run-time state is set anew;
- and, checked after the stamp by the gate itself in the same call, every check that passed then
  still passes.

Anything else (no stamp, an unreadable one, any difference) sends the node through the whole washing
machine, which writes a new stamp when it ends green. Pure functions of plain data but ``state`` and
the file helpers, which read and write through paths given.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat

from ansible_collections.gpufleet.provision.plugins.module_utils._node import fs as _fs

SCHEMA = 1
DEFAULT_PATH = "/var/lib/gpufleet/converged.json"

# Relative to the OS root. What the roles write at their default paths (GRUB sources and
# configuration, GRUB's saved entry, apt/dnf pins and holds, the package databases, sysctl.d,
# modules-load.d, unit files and the scripts they run, the pcie boot script, the RoCE interface files,
# fstab, firmware images, the image manifest) and what they read to decide. A path that does not exist
# counts as absent; its appearing later is a change. A role variable that moves a file elsewhere
# (pcie_lib_dir, firmware_node_dir, storage_fstab, ...) adds its path through ``managed_paths``
# (provision.yml passes them as validate_node's converged_paths). tests/unit/roles/
# test_stamp_sees_role_writes.py fails when a role writes a path this list and those do not cover.
MANAGED = (
    "etc/default/grub", "etc/default/grub.d", "boot/grub/grub.cfg", "boot/grub/grubenv",
    "boot/grub2/grub.cfg", "boot/grub2/grubenv", "etc/kernel/cmdline", "boot/loader/entries",
    "etc/apt/preferences.d", "var/lib/dpkg/status", "etc/dnf/plugins/versionlock.list", "var/lib/rpm",
    "etc/sysctl.d", "etc/modules-load.d", "etc/modprobe.d", "etc/systemd/system",
    "usr/local/sbin/gpufleet-tuning", "usr/local/sbin/gpufleet-roce-qos",
    "etc/gpufleet", "usr/lib/gpufleet-pcie", "etc/netplan", "etc/network/interfaces",
    "etc/network/interfaces.d", "etc/fstab", "var/lib/gpufleet/firmware",
)


def managed_paths(extra=None):
    """``MANAGED`` plus ``extra``, the paths role variables moved (absolute or relative to the OS
    root), each once. Raises ValueError naming a path that is not one under the OS root (empty, the
    root itself, or with a ``..`` component): the stamp would walk the whole disk, or outside it."""
    out = list(MANAGED)
    if extra is None:
        return tuple(out)
    if not isinstance(extra, (list, tuple)):
        raise ValueError("converged_paths: must be a list of paths, got %r" % (extra,))
    for path in extra:
        rel = path.strip().strip("/") if isinstance(path, str) else ""
        if not rel or rel == "." or ".." in rel.split("/") or "\0" in rel:
            raise ValueError("converged_paths: %r is not a path under the OS root" % (path,))
        rel = os.path.normpath(rel)
        if rel not in out:
            out.append(rel)
    return tuple(out)


class StampError(Exception):
    """The stamp cannot be written; the message names the path and the cause."""


def _entry(path, rel):
    """One line of the files digest: the path and what an edit changes (never the content)."""
    try:
        st = os.lstat(path)
    except OSError:
        return "%s absent" % rel
    if stat.S_ISLNK(st.st_mode):
        try:
            return "%s link %s" % (rel, os.readlink(path))
        except OSError:
            return "%s link ?" % rel
    if stat.S_ISDIR(st.st_mode):
        return "%s dir %o" % (rel, st.st_mode)   # its entries are listed: a folder's own mtime adds nothing
    return "%s %o %d %d" % (rel, st.st_mode, st.st_size, st.st_mtime_ns)


def _walk(os_root, rel, skip):
    top = os.path.join(os_root, rel)
    yield _entry(top, rel)
    if not os.path.isdir(top) or os.path.islink(top):
        return
    for base, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(base, name)
            if skip and (path == skip or (base == os.path.dirname(skip) and name.startswith(".converged."))):
                continue
            yield _entry(path, os.path.relpath(path, os_root))


def files_digest(os_root="/", managed=MANAGED, skip=None):
    """``sha256:<hex>`` over the stat lines of every managed path (sorted, recursive); ``skip``, the
    stamp's own path (and its temporary files), is left out wherever it is put."""
    digest = hashlib.sha256()
    for rel in managed:
        for line in _walk(os_root, rel, skip):
            digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return "sha256:" + digest.hexdigest()


def _read_text(path):
    """Text of ``path`` or None, through the rooted reader: it never blocks (a FIFO at the stamp's
    or the boot id's place would hang the converged question) and takes regular files only."""
    root = _fs.Root(os.path.dirname(path) or ".")
    data = root.read_bytes(os.path.basename(path), optional=True)
    try:
        return None if data is None else data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def state(desired, hardware_root="/", os_root="/", path=None, managed=MANAGED):
    """The node's stamp as of now (without ``passing``, which the gate adds) over the ``managed``
    paths (``managed_paths``); ``path``, where the stamp lives, is left out of the files digest
    should it be put in a managed folder."""
    return {
        "schema": SCHEMA,
        "desired": desired,
        "files": files_digest(os_root, managed, skip=path),
        "boot": {
            "boot_id": _read_text(os.path.join(hardware_root, "proc/sys/kernel/random/boot_id")),
            "kernel": _read_text(os.path.join(hardware_root, "proc/sys/kernel/osrelease")),
        },
    }


def differences(old, now):
    """Why ``now`` is not the state ``old`` recorded: [reason]; empty when the node may skip the
    washing machine (the gate's checks still to be compared, ``passing_lost``)."""
    if not isinstance(old, dict) or old.get("schema") != SCHEMA:
        return ["no stamp of a green run (or one of another schema)"]
    reasons = []
    if not now.get("desired") or old.get("desired") != now.get("desired"):
        reasons.append("the desired state changed (profile, role variables or collection)")
    if old.get("files") != now.get("files"):
        reasons.append("files provisioning manages changed since the last green run")
    if None in (now["boot"].get("boot_id"), now["boot"].get("kernel")):
        reasons.append("boot id or kernel release unreadable")
    elif old.get("boot") != now.get("boot"):
        reasons.append("booted since the last green run")
    return reasons


def passing_lost(old, report):
    """Checks that passed when the stamp was written and do not pass now: [reason]."""
    now = dict((c["id"], c["status"]) for c in report.get("checks") or [])
    lost = sorted(i for i in old.get("passing") or [] if now.get(i) != "pass")
    return ["%s no longer passes (%s)" % (i, now.get(i, "not evaluated")) for i in lost]


def with_gate(now, report):
    """The stamp to write after a green gate: ``now`` plus the ids of the checks that passed."""
    return dict(now, passing=sorted(c["id"] for c in report.get("checks") or [] if c["status"] == "pass"))


def read(path):
    """The stamp at ``path``, or None when absent or unreadable (both mean: wash)."""
    text = _read_text(path)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def write(path, stamp):
    """Write ``stamp`` at ``path`` atomically (fs.atomic_write: its folder made, mode 0644, no
    temporary file left on failure). Raises StampError naming the path and the cause."""
    folder = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        text = json.dumps(stamp, sort_keys=True, indent=1) + "\n"
    except (IOError, OSError) as exc:
        raise StampError("converged stamp %s: cannot be written: %s" % (path, exc.strerror or exc))
    except (TypeError, ValueError) as exc:
        raise StampError("converged stamp %s: cannot be written, not JSON: %s" % (path, exc))
    try:
        _fs.atomic_write(path, text, mode=0o644)
    except _fs.WriteError as exc:
        raise StampError("converged stamp %s" % exc)
