"""ttar keeps what matters in a captured tree: symlinks, modes, binary files, missing final newlines."""
import os

import pytest

from lab.hw import ttar


def test_round_trip(tmp_path):
    src = tmp_path / "src"
    (src / "sys/devices/pci0000:15/0000:15:01.0").mkdir(parents=True)
    (src / "sys/bus/pci/devices").mkdir(parents=True)
    (src / "sys/devices/pci0000:15/0000:15:01.0/vendor").write_text("0x8086\n")
    (src / "sys/devices/pci0000:15/0000:15:01.0/config").write_bytes(b"\x86\x80\x2a\x35" + bytes(252))
    (src / "proc").mkdir()
    (src / "proc/odd").write_text("no newline at end")
    (src / "empty").write_text("")
    os.chmod(str(src / "sys/devices/pci0000:15/0000:15:01.0/vendor"), 0o444)
    os.symlink("../../../devices/pci0000:15/0000:15:01.0", str(src / "sys/bus/pci/devices/0000:15:01.0"))
    text = ttar.pack(str(src))
    assert "SymlinkTo: ../../../devices/pci0000:15/0000:15:01.0" in text
    assert "Path: sys/devices/pci0000:15/0000:15:01.0/vendor\nLines: 1\n0x8086\nMode: 444" in text
    dest = tmp_path / "dest"
    ttar.unpack(text, str(dest))
    assert os.readlink(str(dest / "sys/bus/pci/devices/0000:15:01.0")) == "../../../devices/pci0000:15/0000:15:01.0"
    assert (dest / "sys/bus/pci/devices/0000:15:01.0/vendor").read_text() == "0x8086\n"
    assert (dest / "sys/devices/pci0000:15/0000:15:01.0/config").read_bytes() == b"\x86\x80\x2a\x35" + bytes(252)
    assert (dest / "proc/odd").read_text() == "no newline at end"
    assert (dest / "empty").read_text() == ""
    assert os.stat(str(dest / "sys/devices/pci0000:15/0000:15:01.0/vendor")).st_mode & 0o777 == 0o444
    assert ttar.pack(str(dest)) == text


def test_hand_written_archive_and_escape(tmp_path):
    text = "Path: sys/devices/system/node/node0/cpulist\nLines: 1\n0-12,104-116\nMode: 444\n# ttar - - -\n"
    ttar.unpack(text, str(tmp_path / "t"))
    assert (tmp_path / "t/sys/devices/system/node/node0/cpulist").read_text() == "0-12,104-116\n"
    with pytest.raises(ValueError, match="escapes"):
        ttar.unpack("Path: ../../etc/passwd\nLines: 0\n", str(tmp_path / "u"))
