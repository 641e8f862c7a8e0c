# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage that never wipes: what a device already holds, read from its own sectors, and the fstab
entry of a mount. Pure functions over bytes and text; the module reads the device (read-only) and
runs blkid in its no-write probe mode as a second opinion."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import struct

# Head of the device: enough for every superblock below (btrfs sits at 64 KiB).
HEAD_BYTES = 128 * 1024
# Tail: GPT's backup header (last sector), MD 0.90 (64 KiB-aligned, 64 KiB from the end) and
# MD 1.0 (8 KiB from the end) superblocks.
TAIL_BYTES = 128 * 1024

MD_MAGIC = 0xA92B4EFC


class StorageError(ValueError):
    """A mount cannot be made from this device; the message names the device and the cause."""


_FSTYPE = re.compile(r"^[a-z0-9][a-z0-9_.+-]{0,31}$")
_UUID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
# What an fstab field cannot hold: a field separator, a comment, an escape, any control character.
_NOT_IN_FIELD = re.compile(r"[\s#\\\x00-\x1f\x7f]")


def _absolute(option, path, spaces=False):
    """``path`` normalised; StorageError naming the option unless it is absolute and plain (no
    ``.``/``..`` parts, no control character; a space only where fstab can escape it)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise StorageError("%s %r: not an absolute path" % (option, path))
    bad = _NOT_IN_FIELD.search(path.replace(" ", "") if spaces else path)
    if bad:
        raise StorageError("%s %r: %r cannot be in it" % (option, path, bad.group(0)))
    parts = [part for part in path.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise StorageError("%s %r: . and .. are not allowed in it (name the folder itself)" % (option, path))
    return "/" + "/".join(parts)


def validate(path, device, fstype, options, min_size_gb=None, fstab="/etc/fstab"):
    """The module's options checked before anything is read or written: (path, device, options)
    normalised; StorageError naming the option and the value for a relative or odd path, a file
    system type or mount options that would break (or add) an fstab line, a size that is no size."""
    path = _absolute("path", path, spaces=True)
    if path == "/":
        raise StorageError("path '/': the root file system is not a mount this module makes")
    device = _absolute("device", device)
    _absolute("fstab", fstab)
    if not isinstance(fstype, str) or not _FSTYPE.match(fstype):
        raise StorageError("fstype %r: not a file system type (for example ext4 or xfs)" % (fstype,))
    options = "defaults" if options is None else options
    if not isinstance(options, str) or _NOT_IN_FIELD.search(options) or "" in options.split(","):
        raise StorageError("options %r: not mount options (comma-separated, no space, #, backslash or "
                           "control character, no empty item)" % (options,))
    if min_size_gb is not None and not (isinstance(min_size_gb, (int, float)) and not isinstance(min_size_gb, bool)
                                        and 0 <= min_size_gb < float("inf")):
        raise StorageError("min_size_gb %r: not a size in GB (a number, 0 or more)" % (min_size_gb,))
    return path, device, options


def check_uuid(device, uuid):
    """``uuid`` as blkid gave it, or StorageError: it goes into fstab as ``UUID=<uuid>``."""
    if not isinstance(uuid, str) or not _UUID.match(uuid):
        raise StorageError("%s: blkid gave UUID %r, not one fstab can name" % (device, uuid))
    return uuid


def _at(data, offset, magic):
    return len(data) >= offset + len(magic) and data[offset:offset + len(magic)] == magic


def _mbr_partitions(head):
    """Non-empty primary partition types of an MBR (0x55AA at 510), [] when none."""
    if not _at(head, 510, b"\x55\xaa"):
        return []
    types = []
    for index in range(4):
        entry = head[446 + 16 * index:446 + 16 * (index + 1)]
        if len(entry) == 16 and entry[4] != 0:
            types.append(entry[4])
    return types


def signatures(head, tail, size_bytes, sector=512):
    """Signatures found in the first ``head`` and last ``tail`` bytes of a device of ``size_bytes``.

    Returns a list of {"type", "offset"} (offset from the start of the device), empty for a blank
    device. What is looked for (offsets from util-linux libblkid's probers):
    - partition tables: GPT header ``EFI PART`` at LBA 1 (512 or 4096-byte sectors) or its backup
      in the last sector; an MBR (0x55AA at 510) with a partition entry;
    - RAID/LVM/crypto: LVM2 ``LABELONE`` in sectors 0-3; MD superblocks 1.1 (at 0), 1.2 (4 KiB),
      1.0 (8 KiB from the end), 0.90 (64 KiB-aligned, 64 KiB from the end); LUKS ``LUKS\\xba\\xbe``;
    - file systems: ext2/3/4 (0xEF53 at 1080), XFS (``XFSB``), btrfs (``_BHRfS_M`` at 65600), swap
      (``SWAPSPACE2``/``SWAP-SPACE`` before 4 KiB), FAT (``FAT12``/``FAT16``/``FAT32`` labels),
      NTFS, ISO 9660 (``CD001`` at 32769), ZFS labels are not probed (blkid covers them).
    """
    found = []

    def add(kind, offset):
        found.append({"type": kind, "offset": offset})

    for lba_size in (512, 4096):
        if _at(head, lba_size, b"EFI PART"):
            add("gpt", lba_size)
            break
    if tail and size_bytes and _at(tail, len(tail) - sector, b"EFI PART"):
        add("gpt (backup header)", size_bytes - sector)
    parts = _mbr_partitions(head)
    if parts and not any(f["type"].startswith("gpt") for f in found):
        add("dos partition table (types %s)" % ",".join("0x%02x" % t for t in parts), 510)
    for index in range(4):
        if _at(head, index * 512, b"LABELONE"):
            add("LVM2_member", index * 512)
    if _at(head, 0, b"LUKS\xba\xbe"):
        add("crypto_LUKS", 0)
    for offset, version in ((0, "1.1"), (4096, "1.2")):
        if len(head) >= offset + 4 and struct.unpack_from("<I", head, offset)[0] == MD_MAGIC:
            add("linux_raid_member (md %s)" % version, offset)
    if tail and size_bytes:
        tail_start = size_bytes - len(tail)
        md10 = ((size_bytes - 8192) & ~4095) - tail_start
        if 0 <= md10 <= len(tail) - 4 and struct.unpack_from("<I", tail, md10)[0] == MD_MAGIC:
            add("linux_raid_member (md 1.0)", tail_start + md10)
        md090 = ((size_bytes & ~65535) - 65536) - tail_start
        if 0 <= md090 <= len(tail) - 4 and struct.unpack_from("<I", tail, md090)[0] in (MD_MAGIC, 0xFC4E2BA9):
            add("linux_raid_member (md 0.90)", tail_start + md090)
    if _at(head, 1080, b"\x53\xef"):
        add("ext2/3/4", 1024)
    if _at(head, 0, b"XFSB"):
        add("xfs", 0)
    if _at(head, 65600, b"_BHRfS_M"):
        add("btrfs", 65536)
    for page in (4096, 8192, 16384, 65536):
        for magic in (b"SWAPSPACE2", b"SWAP-SPACE"):
            if _at(head, page - 10, magic):
                add("swap", page - 10)
    if _at(head, 510, b"\x55\xaa") and (_at(head, 54, b"FAT1") or _at(head, 82, b"FAT32")):
        add("vfat", 0)
    if _at(head, 3, b"NTFS    "):
        add("ntfs", 3)
    if _at(head, 32769, b"CD001"):
        add("iso9660", 32769)
    return found


def parse_blkid_export(text):
    """``blkid -p -o export <dev>`` -> {KEY: value}; empty when blkid found nothing (exit 2).

    Sample::

        DEVNAME=/dev/loop3
        UUID=0b0f1a5e-...
        BLOCK_SIZE=4096
        TYPE=ext4
        USAGE=filesystem
    """
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key:
            out[key] = value
    return out


def blkid_signature(fields):
    """The blkid verdict as a signature text, None when it names nothing."""
    kind = fields.get("TYPE") or fields.get("PTTYPE")
    if not kind:
        return None
    what = "partition table" if fields.get("PTTYPE") and not fields.get("TYPE") else fields.get("USAGE") or "signature"
    return "%s (%s, blkid)" % (kind, what)


def parse_fstab(text):
    """fstab -> [{"line": n, "spec", "file", "vfstype", "mntops", "freq", "passno"}] (comments skipped)."""
    out = []
    for number, line in enumerate((text or "").splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = stripped.split()
        if len(fields) < 2:
            continue
        fields += ["defaults", "0", "0"][len(fields) - 2:] if len(fields) < 6 else []
        out.append({"line": number, "spec": fields[0], "file": fields[1].replace("\\040", " "), "vfstype": fields[2],
                    "mntops": fields[3], "freq": fields[4], "passno": fields[5]})
    return out


def fstab_line(uuid, path, fstype, options):
    passno = "0" if fstype in ("xfs", "btrfs") else "2"   # fsck.xfs/btrfs do nothing at boot
    return "UUID=%s %s %s %s 0 %s" % (uuid, path.replace(" ", "\\040"), fstype, options or "defaults", passno)


def fstab_update(text, uuid, path, fstype, options):
    """(new text, changed, problem) with exactly one entry for ``path``, by UUID.

    An existing entry for the path with the same UUID/type/options is left as it is; one that
    differs is replaced in place; several entries for the path are a problem (returned, nothing
    changed), because which one wins at boot is not what the profile says. A UUID already used for
    another mount point is a problem too.
    """
    want = fstab_line(uuid, path, fstype, options)
    entries = parse_fstab(text)
    mine = [e for e in entries if e["file"] == path]
    other = [e for e in entries if e["spec"] == "UUID=" + uuid and e["file"] != path]
    if other:
        return text, False, "UUID=%s is already in fstab for %s (line %d)" % (uuid, other[0]["file"], other[0]["line"])
    if len(mine) > 1:
        return text, False, "fstab has %d entries for %s (lines %s)" % (len(mine), path, ", ".join(str(e["line"]) for e in mine))
    lines = (text or "").splitlines()
    if mine:
        entry = mine[0]
        same = (entry["spec"] == "UUID=" + uuid and entry["vfstype"] == fstype
                and entry["mntops"] == (options or "defaults"))
        if same:
            return text, False, None
        lines[entry["line"] - 1] = want
    else:
        lines.append(want)
    return "\n".join(lines) + "\n", True, None


# blkid TYPE -> the name signatures() gives the same superblock
_OWN_NAME = {"ext2": "ext2/3/4", "ext3": "ext2/3/4", "ext4": "ext2/3/4", "xfs": "xfs", "btrfs": "btrfs",
             "swap": "swap", "vfat": "vfat", "ntfs": "ntfs"}


def decide(state, path, fstype, min_size_gb=None):
    """What to do with a device, from what inspection found. Pure.

    state: {device, size_bytes, signatures: [...], blkid: {...}, holders: [...], partitions: [...],
    mounted_at: [mount points]} and mounts_at_path: [(device, fstype)] already mounted at ``path``.
    Returns {"action": "use"|"create", "uuid", "reason"} or raises StorageError naming the device and
    what it holds. "use": the device already holds the wanted file system and nothing else (a run
    before made it, or the operator did): mount it, never format. "create": blank, big enough.
    """
    dev = state["device"]
    blk = state.get("blkid") or {}
    mounted_here = list(state.get("mounts_at_path") or [])
    if mounted_here and mounted_here[-1][0] != dev:
        raise StorageError("%s: %s is mounted there, not %s" % (path, mounted_here[-1][0], dev))
    others = [p for p in state.get("mounted_at") or [] if p != path]
    if others:
        raise StorageError("%s is mounted at %s: not touched" % (dev, ", ".join(others)))
    if state.get("holders"):
        raise StorageError("%s is in use by %s (RAID/LVM/dm member): refused, nothing changed" % (dev, ", ".join(state["holders"])))
    if state.get("partitions"):
        raise StorageError("%s has partitions (%s): refused, nothing changed" % (dev, ", ".join(state["partitions"])))
    found = [s["type"] for s in state.get("signatures") or []]
    verdict = blkid_signature(blk)
    if found or verdict:
        same = (blk.get("TYPE") == fstype and not blk.get("PTTYPE") and blk.get("UUID")
                and all(kind == _OWN_NAME.get(fstype, fstype) for kind in found))
        if same:
            check_uuid(dev, blk["UUID"])
            return {"action": "use", "uuid": blk["UUID"], "reason": "%s already holds %s (UUID %s)" % (dev, fstype, blk["UUID"])}
        what = found + ([verdict] if verdict else [])
        raise StorageError("%s holds data (%s): refused, never formatted or wiped (wanted %s for %s)"
                           % (dev, "; ".join(what), fstype, path))
    if min_size_gb is not None and state.get("size_bytes") is not None and state["size_bytes"] < min_size_gb * 1e9:
        raise StorageError("%s is %.1f GB, the profile wants at least %s GB for %s (growing is out of scope)"
                           % (dev, state["size_bytes"] / 1e9, min_size_gb, path))
    return {"action": "create", "uuid": None, "reason": "%s is blank: create %s" % (dev, fstype)}
