"""_os.state: reading the GRUB sources (what is refused before any edit), the regenerate program, and
writing the sources all or none (issue 32). Expectations by hand."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root
from ansible_collections.gpufleet.provision.plugins.module_utils._os import state as S


def _tree(tmp_path, main=b"GRUB_CMDLINE_LINUX=\"\"\n", **dropins):
    (tmp_path / "etc/default/grub.d").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_bytes(main)
    for name, data in dropins.items():
        (tmp_path / "etc/default/grub.d" / name).write_bytes(data)
    return Root(str(tmp_path))


def test_read_sources_in_sourcing_order(tmp_path):
    fs = _tree(tmp_path, **{"50-a.cfg": b"A=1\n", "40-b.cfg": b"B=1\n", "notes.txt": b"\x00"})
    assert S.read_sources(fs) == [("etc/default/grub", 'GRUB_CMDLINE_LINUX=""\n'),
                                  ("etc/default/grub.d/40-b.cfg", "B=1\n"), ("etc/default/grub.d/50-a.cfg", "A=1\n")]


@pytest.mark.parametrize("main, dropin, message", [
    (b"\x00\x00", b"A=1\n", "etc/default/grub: binary content (byte 0x00 at offset 0), not a GRUB source: not edited (%s/etc/default/grub)"),
    (b"A=1\n", b"B='x\n", "etc/default/grub.d/60-x.cfg line 1: unterminated quote (the ' opened there is never closed) "
                          "(%s/etc/default/grub.d/60-x.cfg)"),
])
def test_read_sources_refuses_what_it_would_not_edit(tmp_path, main, dropin, message):
    fs = _tree(tmp_path, main, **{"60-x.cfg": dropin})
    with pytest.raises(S.OsLayerError) as err:
        S.read_sources(fs)
    assert str(err.value) == message % tmp_path


def test_check_program(tmp_path):
    tool = tmp_path / "update-grub"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    S.check_program([str(tool), "-o", "x"], lambda name: None)
    S.check_program(["update-grub"], lambda name: "/usr/sbin/" + name)
    for argv, message in (([], "regenerate []: no program to run"), ([" x"], "regenerate [' x']: no program to run"),
                          (["update-grub"], "update-grub: not found or not executable (regenerate update-grub): nothing edited"),
                          ([str(tmp_path)], "%s: not found or not executable (regenerate %s): nothing edited" % (tmp_path, tmp_path))):
        with pytest.raises(S.OsLayerError) as err:
            S.check_program(argv, lambda name: None)
        assert str(err.value) == message


@pytest.mark.parametrize("release", ["6.8.0-45-generic", "5.14.0-427.13.1.el9_4.x86_64", "6.1.0+rt~1"])
def test_check_release_accepts_releases(release):
    S.check_release(release)


@pytest.mark.parametrize("release", ["", "../x", "-v", "a b", "a\n", "x" * 65, None])
def test_check_release_refuses_other_text(release):
    with pytest.raises(S.OsLayerError) as err:
        S.check_release(release)
    assert str(err.value).startswith("kernel release %r: not a kernel release" % (release,))


def test_write_sources_all_or_none(tmp_path):
    """The second file cannot be written (its name leaves no room for a temporary name beside it):
    the first, already written, gets its text back."""
    long_name = "z" * 251 + ".cfg"
    fs = _tree(tmp_path, b"OLD\n", **{long_name: b"OLD2\n"})
    sources = [("etc/default/grub", "OLD\n"), ("etc/default/grub.d/" + long_name, "OLD2\n")]
    with pytest.raises(S.OsLayerError) as err:
        S.write_sources(fs, {"etc/default/grub": "NEW\n", "etc/default/grub.d/" + long_name: "NEW2\n"}, sources)
    assert str(err.value) == "%s/etc/default/grub.d/%s: cannot write (File name too long); restored etc/default/grub" % (
        tmp_path, long_name)
    assert (tmp_path / "etc/default/grub").read_text() == "OLD\n"
    assert sorted(os.listdir(str(tmp_path / "etc/default"))) == ["grub", "grub.d"]
    S.write_sources(fs, {"etc/default/grub": "NEW\n"}, sources)
    assert (tmp_path / "etc/default/grub").read_text() == "NEW\n"
