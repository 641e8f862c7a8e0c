"""Signatures from a device's own sectors (built by hand at the documented offsets), blkid, fstab."""
import struct

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import storage

SIZE = 64 * 1024 * 1024


def blank():
    return bytearray(storage.HEAD_BYTES), bytearray(storage.TAIL_BYTES)


def kinds(head, tail, size=SIZE):
    return [s["type"] for s in storage.signatures(bytes(head), bytes(tail), size)]


def test_blank_device_has_nothing():
    head, tail = blank()
    assert kinds(head, tail) == []


@pytest.mark.parametrize("offset,magic,expected", [
    (1080, b"\x53\xef", "ext2/3/4"),
    (0, b"XFSB", "xfs"),
    (65600, b"_BHRfS_M", "btrfs"),
    (4086, b"SWAPSPACE2", "swap"),
    (0, b"LUKS\xba\xbe", "crypto_LUKS"),
    (512, b"LABELONE", "LVM2_member"),
    (3, b"NTFS    ", "ntfs"),
    (32769, b"CD001", "iso9660"),
    (512, b"EFI PART", "gpt"),
    (4096, b"EFI PART", "gpt"),
])
def test_head_signatures(offset, magic, expected):
    head, tail = blank()
    head[offset:offset + len(magic)] = magic
    assert kinds(head, tail) == [expected]


def test_mbr_with_a_partition_and_empty_mbr():
    head, tail = blank()
    head[510:512] = b"\x55\xaa"
    assert kinds(head, tail) == []          # boot signature alone, no partition entry
    head[446 + 4] = 0x83
    assert kinds(head, tail) == ["dos partition table (types 0x83)"]


def test_md_superblocks_head_and_tail():
    head, tail = blank()
    struct.pack_into("<I", head, 4096, storage.MD_MAGIC)
    assert kinds(head, tail) == ["linux_raid_member (md 1.2)"]
    head, tail = blank()
    # 1.0: 8 KiB from the end, 4 KiB aligned
    struct.pack_into("<I", tail, len(tail) - 8192, storage.MD_MAGIC)
    assert kinds(head, tail) == ["linux_raid_member (md 1.0)"]
    head, tail = blank()
    # 0.90: 64 KiB from the end (the size is 64 KiB aligned here)
    struct.pack_into("<I", tail, len(tail) - 65536, storage.MD_MAGIC)
    got = storage.signatures(bytes(head), bytes(tail), SIZE)
    assert got == [{"type": "linux_raid_member (md 0.90)", "offset": SIZE - 65536}]


def test_gpt_backup_header_only():
    head, tail = blank()   # primary header wiped, backup in the last sector still there
    tail[-512:-504] = b"EFI PART"
    assert storage.signatures(bytes(head), bytes(tail), SIZE) == [{"type": "gpt (backup header)", "offset": SIZE - 512}]


def test_blkid_export():
    fields = storage.parse_blkid_export("DEVNAME=/dev/loop3\nUUID=0b0f1a5e-1111-2222-3333-444455556666\nBLOCK_SIZE=4096\n"
                                        "TYPE=ext4\nUSAGE=filesystem\n")
    assert fields["TYPE"] == "ext4" and storage.blkid_signature(fields) == "ext4 (filesystem, blkid)"
    assert storage.blkid_signature(storage.parse_blkid_export("DEVNAME=/dev/sdb\nPTUUID=abc\nPTTYPE=gpt\n")) == "gpt (partition table, blkid)"
    assert storage.blkid_signature({}) is None


FSTAB = """# /etc/fstab: static file system information.
UUID=1111 / ext4 errors=remount-ro 0 1
/dev/md0 /raid ext4 defaults 0 2
"""


def test_fstab_update_replaces_adds_and_keeps():
    text, changed, problem = storage.fstab_update(FSTAB, "2222", "/raid", "ext4", "defaults,noatime")
    assert changed and problem is None
    assert text.splitlines()[2] == "UUID=2222 /raid ext4 defaults,noatime 0 2"
    again = storage.fstab_update(text, "2222", "/raid", "ext4", "defaults,noatime")
    assert again == (text, False, None)
    text, changed, problem = storage.fstab_update(FSTAB, "3333", "/scratch", "xfs", None)
    assert problem is None
    assert changed and text.endswith("UUID=3333 /scratch xfs defaults 0 0\n")


def test_fstab_problems():
    twice = FSTAB + "/dev/sdb1 /raid xfs defaults 0 0\n"
    assert storage.fstab_update(twice, "2222", "/raid", "ext4", None)[2] == "fstab has 2 entries for /raid (lines 3, 4)"
    assert storage.fstab_update(FSTAB, "1111", "/raid", "ext4", None)[2] == "UUID=1111 is already in fstab for / (line 2)"
