"""The command line merge over the GRUB files cloud images ship (_grub.plan), grub.cfg's default
entry, and GRUB_DEFAULT. Expected files are written by hand below."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline
from ansible_collections.gpufleet.provision.plugins.module_utils._os import grub as _grub

# Ubuntu 22.04/24.04 cloud image /etc/default/grub (the settings lines; comments trimmed).
UBUNTU_GRUB = """\
# If you change this file or any /etc/default/grub.d/*.cfg file,
# run 'update-grub' afterwards to update /boot/grub/grub.cfg.
GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX=""
"""
# /etc/default/grub.d/50-cloudimg-settings.cfg of the generic cloud image.
CLOUDIMG = """\
# Cloud Image specific Grub settings for Generic Cloud Images
# CLOUD_IMG: This file was created/modified by the Cloud Image build process

# Set the recordfail timeout
GRUB_RECORDFAIL_TIMEOUT=0

# Do not wait on grub prompt
GRUB_TIMEOUT=0

# Set the default commandline
GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"

# Set the grub console type
GRUB_TERMINAL=console
"""
# The AWS image's variant, and a site drop-in that appends (the lab's twin1 fault).
AWS = 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295"\nGRUB_TERMINAL=console\n'
SITE = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=32"\n'

H100 = _cmdline.rules(
    ["intel_iommu=on", "iommu=pt", "transparent_hugepage=never", "numa_balancing=disable",
     "default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128"],
    forbidden=["pci=noats", "intel_iommu=off", "nouveau.modeset=1"], allow_repeated=["console"])


def _after(sources, result):
    merged = [(rel, result["changed"].get(rel, text)) for rel, text in sources]
    return [w for w, _o in _grub.effective(_grub.parse_sources(merged))]


def test_cloud_image_gets_the_parameters_once_and_keeps_its_console():
    sources = [("etc/default/grub", UBUNTU_GRUB), ("etc/default/grub.d/50-cloudimg-settings.cfg", CLOUDIMG)]
    result = _grub.plan(sources, H100)
    assert result["before"] == ["console=tty1", "console=ttyS0"]
    # only the one line that needed it changed; the drop-in (console only) is left byte for byte
    assert list(result["changed"]) == ["etc/default/grub"]
    assert result["changed"]["etc/default/grub"] == UBUNTU_GRUB.replace(
        'GRUB_CMDLINE_LINUX=""',
        'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable '
        'default_hugepagesz=1G hugepagesz=1G hugepages=128"')
    assert result["after"] == ["intel_iommu=on", "iommu=pt", "transparent_hugepage=never", "numa_balancing=disable",
                               "default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128", "console=tty1", "console=ttyS0"]
    assert _after(sources, result) == result["after"]
    # a second plan on the result changes nothing
    again = [(rel, result["changed"].get(rel, text)) for rel, text in sources]
    assert _grub.plan(again, H100)["changed"] == {}


def test_self_reference_in_a_dropin_loses_its_duplicate_and_keeps_the_reference():
    main = UBUNTU_GRUB.replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt hugepagesz=1G hugepages=64"')
    sources = [("etc/default/grub", main), ("etc/default/grub.d/50-cloudimg-settings.cfg", AWS),
               ("etc/default/grub.d/60-site.cfg", SITE)]
    result = _grub.plan(sources, H100)
    assert "hugepages: default_hugepagesz=1G hugepagesz=1G hugepages=128 expected, found hugepagesz=1G hugepages=64 hugepages=32" \
        in result["problems"]
    assert result["changed"]["etc/default/grub.d/60-site.cfg"] == 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX"\n'
    assert 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable ' \
           'default_hugepagesz=1G hugepagesz=1G hugepages=128"' in result["changed"]["etc/default/grub"]
    assert "etc/default/grub.d/50-cloudimg-settings.cfg" not in result["changed"]
    assert result["after"][-3:] == ["console=tty1", "console=ttyS0", "nvme_core.io_timeout=4294967295"]
    assert _after(sources, result).count("hugepages=128") == 1


def test_forbidden_removed_wherever_it_is_and_other_words_stay_in_place():
    main = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash pci=noats"\nGRUB_CMDLINE_LINUX="pci=realloc intel_iommu=off"\n'
    result = _grub.plan([("etc/default/grub", main)], H100)
    text = result["changed"]["etc/default/grub"]
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"' in text
    # pci=realloc is not pci=noats: it stays, first on its line
    assert 'GRUB_CMDLINE_LINUX="pci=realloc intel_iommu=on iommu=pt ' in text
    assert "intel_iommu=off" not in text and "pci=noats" not in text


def test_unowned_duplicate_keeps_the_last_and_repeatable_keys_stay():
    main = 'GRUB_CMDLINE_LINUX="mitigations=off console=tty0 mitigations=auto"\n'
    rule = _cmdline.rules(["iommu=pt"], allow_repeated=["console"])
    result = _grub.plan([("etc/default/grub", main)], rule)
    assert result["changed"]["etc/default/grub"] == 'GRUB_CMDLINE_LINUX="console=tty0 mitigations=auto iommu=pt"\n'


def test_right_command_line_in_another_order_is_left_alone():
    # the lab's baseline: every parameter once, THP/NUMA after the hugepage block
    main = ('GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt default_hugepagesz=1G hugepagesz=1G hugepages=128 '
            'transparent_hugepage=never numa_balancing=disable"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    result = _grub.plan([("etc/default/grub", main)], H100)
    assert result["changed"] == {} and result["problems"] == []


def test_no_assignment_at_all_appends_one_and_missing_main_file_fails():
    result = _grub.plan([("etc/default/grub", "GRUB_TIMEOUT=5\n")], _cmdline.rules(["iommu=pt"]))
    assert result["changed"]["etc/default/grub"] == 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="iommu=pt"\n'
    with pytest.raises(_grub.GrubError, match="etc/default/grub missing"):
        _grub.plan([], _cmdline.rules(["iommu=pt"]))


def test_values_that_cannot_be_edited_word_by_word_name_the_file_and_line():
    with pytest.raises(_grub.GrubError, match=r"etc/default/grub.d/99-x.cfg line 2: cannot edit GRUB_CMDLINE_LINUX"):
        _grub.plan([("etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n"),
                    ("etc/default/grub.d/99-x.cfg", "# x\nGRUB_CMDLINE_LINUX=\"$(cat /etc/args)\"\n")], H100)


def test_default_referring_to_linux_cannot_be_fixed_and_says_so():
    main = 'GRUB_CMDLINE_LINUX="iommu=pt"\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX quiet"\n'
    with pytest.raises(_grub.GrubError, match="iommu=pt given 2 times|iommu=pt expected, found iommu=pt iommu=pt"):
        _grub.plan([("etc/default/grub", main)], _cmdline.rules(["iommu=pt"]))


def test_problems_and_owned_view():
    words = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=x ro intel_iommu=on hugepagesz=1G hugepages=64 hugepages=32 quiet".split()
    found = _cmdline.problems(words, H100)
    assert "iommu=pt missing" in found and "transparent_hugepage=never missing" in found
    assert _cmdline.owned_view(words, H100) == ["intel_iommu=on", "hugepagesz=1G", "hugepages=64", "hugepages=32"]
    with pytest.raises(_cmdline.CmdlineError, match="both required and forbidden"):
        _cmdline.rules(["pci=noats"], forbidden=["pci=noats"])


CFG = """\
set default="0"
menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-u1' {
    linux    /boot/vmlinuz-6.8.0-45-generic root=UUID=u1 ro intel_iommu=on  quiet
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-u1' {
    menuentry 'Ubuntu, with Linux 6.8.0-45-generic' --class ubuntu $menuentry_id_option 'gnulinux-6.8.0-45-generic-advanced-u1' {
        linux    /boot/vmlinuz-6.8.0-45-generic root=UUID=u1 ro intel_iommu=on  quiet
    }
    menuentry 'Ubuntu, with Linux 6.8.0-45-generic (recovery mode)' --class ubuntu $menuentry_id_option 'gnulinux-6.8.0-45-generic-recovery-u1' {
        linux    /boot/vmlinuz-6.8.0-45-generic root=UUID=u1 ro single intel_iommu=on
    }
    menuentry 'Ubuntu, with Linux 6.8.0-40-generic' --class ubuntu $menuentry_id_option 'gnulinux-6.8.0-40-generic-advanced-u1' {
        linux    /boot/vmlinuz-6.8.0-40-generic root=UUID=u1 ro intel_iommu=on  quiet
    }
}
"""


def test_default_entry_and_the_entry_of_a_release():
    assert _grub.default_entry(CFG) == {"release": "6.8.0-45-generic", "title": "Ubuntu",
                                        "args": ["root=UUID=u1", "ro", "intel_iommu=on", "quiet"]}
    path = _grub.entry_for_release(CFG, "6.8.0-40-generic")
    assert path == "gnulinux-advanced-u1>gnulinux-6.8.0-40-generic-advanced-u1"
    assert _grub.default_entry(CFG.replace('set default="0"', 'set default="%s"' % path))["release"] == "6.8.0-40-generic"
    assert _grub.entry_for_release(CFG, "6.8.0-45-generic") == "gnulinux-advanced-u1>gnulinux-6.8.0-45-generic-advanced-u1"
    assert _grub.entry_for_release(CFG, "6.9.0-1-generic") is None
    saved = CFG.replace('set default="0"', 'set default="saved"')
    assert _grub.default_entry(saved, "saved_entry=1>2\n")["release"] == "6.8.0-40-generic"


def test_set_default_edits_the_deciding_source():
    sources = [("etc/default/grub", UBUNTU_GRUB), ("etc/default/grub.d/50-x.cfg", 'GRUB_DEFAULT="Advanced options>old"\n')]
    assert _grub.source_default(sources) == "Advanced options>old"
    assert _grub.set_default(sources, "a>b") == {"etc/default/grub.d/50-x.cfg": 'GRUB_DEFAULT="a>b"\n'}
    assert _grub.set_default([("etc/default/grub", UBUNTU_GRUB)], "0") == {}


# ---------------------------------------------------------------- what is never edited (issue 32)

def test_check_source_accepts_what_ubuntu_ships():
    _grub.check_source("etc/default/grub", UBUNTU_GRUB)
    _grub.check_source("etc/default/grub.d/50-cloudimg-settings.cfg", CLOUDIMG)
    _grub.check_source("x", "GRUB_CMDLINE_LINUX=\"a \\\" b\"\nGRUB_CMDLINE_LINUX_DEFAULT='it''s'\n# don't\nX=1 # it's\n")
    _grub.check_source("x", 'GRUB_CMDLINE_LINUX="a\nb"\n')     # a quote over two lines is shell; closed


@pytest.mark.parametrize("text, message", [
    ('A=1\nGRUB_CMDLINE_LINUX="quiet\nB=2\n', "x line 2: unterminated quote (the \" opened there is never closed)"),
    ("GRUB_DEFAULT='0\n", "x line 1: unterminated quote (the ' opened there is never closed)"),
    ("GRUB_DISTRIBUTOR=`lsb_release\n", "x line 1: unterminated quote (the ` opened there is never closed)"),
    ("A=\"it's\" # '\nB='x\n", "x line 2: unterminated quote (the ' opened there is never closed)"),
    ('GRUB_CMDLINE_LINUX = "quiet"\n', "x line 1: GRUB_CMDLINE_LINUX is not set with NAME=value (no blanks around =): "
                                       "'GRUB_CMDLINE_LINUX = \"quiet\"'"),
    ('A=1\n  export GRUB_DEFAULT\n', "x line 2: GRUB_DEFAULT is not set with NAME=value (no blanks around =): "
                                     "'  export GRUB_DEFAULT'"),
    ('GRUB_CMDLINE_LINUX_DEFAULT+=" x"\n', "x line 1: GRUB_CMDLINE_LINUX_DEFAULT is not set with NAME=value"),
])
def test_check_source_refuses_what_update_grub_would_read_otherwise(text, message):
    with pytest.raises(_grub.GrubError) as err:
        _grub.check_source("x", text)
    assert str(err.value).startswith(message)


def test_check_source_leaves_other_variables_alone():
    _grub.check_source("x", "GRUB_CMDLINE_LINUX_EXTRA = 1\nif [ -n \"$X\" ]; then GRUB_TIMEOUT=3; fi\n")


@pytest.mark.parametrize("data, message", [
    (b"\x00" * 10, "g: binary content (byte 0x00 at offset 0), not a GRUB source: not edited"),
    (b"A=1\n\x7fELF", "g: binary content (byte 0x7f at offset 4), not a GRUB source: not edited"),
    (b"A=1\n# caf\xe9\n", "g: not UTF-8 text (offset 9), not a GRUB source: not edited"),
])
def test_check_text_refuses_binary(data, message):
    with pytest.raises(_grub.GrubError) as err:
        _grub.check_text("g", data)
    assert str(err.value) == message


def test_check_text_gives_the_text():
    assert _grub.check_text("g", b"A=1\r\n\tB=\x1b[0m\x0c\n") == "A=1\r\n\tB=\x1b[0m\x0c\n"


@pytest.mark.parametrize("value", ['a"b', "a$(reboot)", "a`id`", "a\\b", "a\nGRUB_X=1", ""])
def test_set_default_refuses_a_value_that_is_not_one_quoted_word(value):
    with pytest.raises(_grub.GrubError) as err:
        _grub.set_default([(_grub.MAIN, "GRUB_DEFAULT=0\n")], value)
    assert str(err.value).startswith("GRUB_DEFAULT %r: not written" % value)


@pytest.mark.parametrize("option, word", [("required", "a b"), ("required", 'a"b'), ("forbidden", "x\ny"),
                                          ("allow_repeated", "$X"), ("required", ""), ("required", "=x"),
                                          ("required", "a" * 4097), ("forbidden", 7)])
def test_rules_refuse_words_grub_cannot_carry(option, word):
    args = {"params": ["quiet"], "forbidden": [], "allow_repeated": []}
    args[{"required": "params"}.get(option, option)] = [word]
    with pytest.raises(_cmdline.CmdlineError) as err:
        _cmdline.rules(**args)
    assert str(err.value).startswith("%s: kernel command line parameter %r: one parameter" % (option, word))
