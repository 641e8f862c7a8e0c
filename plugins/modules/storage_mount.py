#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: storage_mount
short_description: Make a mount from a named device, never wiping anything
version_added: 0.3.0
description:
  - Makes O(path) a mount of O(fstype) from O(device), persistent in fstab by UUID.
  - Reads what the device holds first, read-only, two ways - its own first and last 128 KiB
    (partition tables incl. GPT's backup header, MD RAID 0.90/1.0/1.1/1.2, LVM2, LUKS, ext2/3/4,
    XFS, btrfs, swap, FAT, NTFS, ISO 9660) and C(blkid -p -o export) (a probe that writes nothing) -
    plus its partitions and holders in sysfs and the mount table.
  - A blank device is formatted with C(mkfs -t <fstype>). A device that already holds the wanted
    file system and nothing else is used as it is (mounted, never formatted). Anything else - another
    file system, a partition table, RAID/LVM/LUKS metadata, partitions, holders, mounted elsewhere -
    is refused, naming the device and what was found; nothing is changed.
  - Growing, shrinking and repartitioning are out of scope.
  - The options are checked before anything is read or written - an absolute mount point without
    C(.)/C(..) parts, tabs or newlines (a space is escaped in fstab), mount options without blanks, C(#)
    or backslashes, a plain file system type, a size of 0 or more - so nothing can add or break a line
    of the fstab. The fstab is read first (a FIFO, a folder or a file that is not text there is an error),
    and its problems (two entries for the mount point, the UUID already used) are found before C(mkfs).
author:
  - gpufleet maintainers (@gpufleet)
options:
  path:
    description: The mount point, an absolute path (created when missing; not V(/)).
    type: path
    required: true
  device:
    description: The device, an absolute path (a C(/dev/disk/by-id/...) path is best; symlinks are resolved).
    type: path
    required: true
  fstype:
    description: File system to create or expect.
    type: str
    required: true
  options:
    description: Mount options, comma-separated (no blank, C(#) or backslash, no empty item).
    type: str
    default: defaults
  min_size_gb:
    description: Refuse a blank device smaller than this (GB = 10^9 bytes).
    type: float
  fstab:
    description: The fstab to keep the entry in (tests point it elsewhere).
    type: path
    default: /etc/fstab
attributes:
  check_mode:
    support: full
    description: Inspects (read-only) and returns what it would do, including refusals; changes nothing.
  diff_mode:
    support: full
    description: The fstab before and after.
  idempotent:
    support: full
    description: A mount that is right is left alone.
"""

EXAMPLES = r"""
- name: /raid from the first data NVMe
  gpufleet.provision.storage_mount:
    path: /raid
    device: /dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S64FNE0R800123
    fstype: ext4
    options: defaults,noatime
"""

RETURN = r"""
action:
  description: C(create) (formatted a blank device), C(use) (it held the file system already) or C(none) (mounted and in fstab).
  returned: success
  type: str
device:
  description: The resolved device.
  returned: success
  type: str
uuid:
  description: The file system UUID (C(null) in check mode before a create).
  returned: success
  type: str
steps:
  description: What was (check mode - would be) done, in order.
  returned: success
  type: list
  elements: str
reboot_required:
  description: Always false.
  returned: success
  type: bool
reboot_reasons:
  description: Always empty.
  returned: success
  type: list
  elements: str
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import storage
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root, WriteError, atomic_write
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import parse_mounts


def _read_text(path, default=""):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def _blkid(module, device):
    rc, out, err = module.run_command([module.get_bin_path("blkid", required=True), "-p", "-o", "export", device])
    if rc not in (0, 2):   # 2: nothing found
        raise storage.StorageError("%s: blkid -p failed (exit %d): %s" % (device, rc, (err or out).strip()))
    return storage.parse_blkid_export(out) if rc == 0 else {}


def inspect(module, device, path):
    """Read-only: what the device holds and where things are mounted."""
    if not os.path.exists(device):
        raise storage.StorageError("%s: no such device" % device)
    real = os.path.realpath(device)
    if not stat.S_ISBLK(os.stat(real).st_mode):
        raise storage.StorageError("%s (%s) is not a block device" % (device, real))
    fd = os.open(real, os.O_RDONLY)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, 0, os.SEEK_SET)
        head = os.read(fd, min(size, storage.HEAD_BYTES))
        tail_len = min(size, storage.TAIL_BYTES)
        os.lseek(fd, size - tail_len, os.SEEK_SET)
        tail = os.read(fd, tail_len)
    finally:
        os.close(fd)
    name = os.path.basename(real)
    sysdir = "/sys/class/block/" + name
    holders = sorted(os.listdir(sysdir + "/holders")) if os.path.isdir(sysdir + "/holders") else []
    partitions = sorted(n for n in (os.listdir(sysdir) if os.path.isdir(sysdir) else [])
                        if os.path.exists(os.path.join(sysdir, n, "partition")))
    mounts = parse_mounts(_read_text("/proc/self/mounts"))
    return {"device": real, "size_bytes": size, "signatures": storage.signatures(head, tail, size),
            "blkid": _blkid(module, real), "holders": holders, "partitions": partitions,
            "mounted_at": [m["mountpoint"] for m in mounts if os.path.realpath(m["device"]) == real],
            "mounts_at_path": [(os.path.realpath(m["device"]), m["fstype"]) for m in mounts if m["mountpoint"] == path]}


def read_fstab(path):
    """The fstab's text ("" when absent); StorageError naming it when it is not a regular UTF-8 text
    file (read without blocking: a FIFO there never hangs the run) or its folder is not a folder."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise storage.StorageError("fstab %s: its folder %s is not a folder" % (path, folder))
    root = Root(folder)
    data = root.read_bytes(os.path.basename(path), optional=True)
    if data is None:
        if root.problems:
            raise storage.StorageError("fstab %s: %s" % (path, root.problems[0]["detail"]))
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise storage.StorageError("fstab %s: not UTF-8 text, left as it is" % path)


def _mkfs(module, device, fstype):
    argv = [module.get_bin_path("mkfs", required=True), "-t", fstype, device]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise storage.StorageError("%s: %s failed (exit %d): %s" % (device, " ".join(argv), rc, (err or out).strip()[-500:]))
    uuid = _blkid(module, device).get("UUID")
    if not uuid:
        raise storage.StorageError("%s: no UUID after mkfs -t %s" % (device, fstype))
    return storage.check_uuid(device, uuid)


def run(module):
    p = module.params
    path, device, options = storage.validate(p["path"], p["device"], p["fstype"], p["options"], p["min_size_gb"], p["fstab"])
    if os.path.lexists(path) and not os.path.isdir(path):
        raise storage.StorageError("%s: exists and is not a folder" % path)
    old = read_fstab(p["fstab"])
    state = inspect(module, device, path)
    decision = storage.decide(state, path, p["fstype"], p["min_size_gb"])
    steps, changed, uuid = [], False, decision["uuid"]
    # the fstab's problems (two entries for the path, the UUID used elsewhere) before anything is made
    _new, _changed, problem = storage.fstab_update(old, uuid or "<new file system>", path, p["fstype"], options)
    if problem:
        raise storage.StorageError("%s: %s" % (p["fstab"], problem))
    if decision["action"] == "create":
        steps.append("mkfs -t %s %s" % (p["fstype"], state["device"]))
        changed = True
        if not module.check_mode:
            uuid = _mkfs(module, state["device"], p["fstype"])
    new, fstab_changed, problem = storage.fstab_update(old, uuid or "<new file system>", path, p["fstype"], options)
    if problem:
        raise storage.StorageError("%s: %s" % (p["fstab"], problem))
    result = {}
    if fstab_changed:
        steps.append("fstab: %s" % storage.fstab_line(uuid or "<new file system>", path, p["fstype"], options))
        changed = True
        if module._diff:
            result["diff"] = {"before": old, "after": new, "before_header": p["fstab"], "after_header": p["fstab"]}
        if not module.check_mode:
            try:
                atomic_write(p["fstab"], new)
            except WriteError as exc:
                raise storage.StorageError("fstab %s" % exc)
    if not state["mounts_at_path"]:
        steps.append("mount -t %s -o %s %s %s" % (p["fstype"], options, state["device"], path))
        changed = True
        if not module.check_mode:
            _mount(module, state["device"], path, p["fstype"], options)
    action = decision["action"] if decision["action"] == "create" or changed else "none"
    result.update(changed=changed, action=action, device=state["device"], uuid=uuid, steps=steps,
                  reason=decision["reason"], reboot_required=False, reboot_reasons=[])
    return result


def _mount(module, device, path, fstype, options):
    if not os.path.isdir(path):
        os.makedirs(path, 0o755)
    argv = [module.get_bin_path("mount", required=True), "-t", fstype, "-o", options, device, path]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise storage.StorageError("%s: %s failed (exit %d): %s" % (path, " ".join(argv), rc, (err or out).strip()))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            device=dict(type="path", required=True),
            fstype=dict(type="str", required=True),
            options=dict(type="str", default="defaults"),
            min_size_gb=dict(type="float"),
            fstab=dict(type="path", default="/etc/fstab"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except storage.StorageError as exc:
        module.fail_json(msg="storage_mount %s: %s" % (module.params["path"], exc))
    except (IOError, OSError) as exc:
        where = getattr(exc, "filename", None) or module.params["device"]
        module.fail_json(msg="storage_mount %s: %s: %s" % (module.params["path"], where, exc.strerror or exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
