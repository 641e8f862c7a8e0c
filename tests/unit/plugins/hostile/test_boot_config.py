"""Hostile input against what reaches boot configuration: the GRUB sources (kernel_cmdline,
grub_default) and the RoCE rails' netplan / ifupdown files and QoS boot script (roce_rails).

Each case runs the module as Ansible does on a temporary root and asserts one outcome: a clear
error naming the file, line, rail, interface or option and the value, with the tree byte for byte
as it was and no temporary file left; or the documented right result. Check mode fails the same.
"""
import os

import pytest

from tests.unit.plugins.hostile._tree import snapshot  # noqa: E402  (the repository is on sys.path: tests/conftest.py)

COVERS = ["module:kernel_cmdline", "module:grub_default", "module:roce_rails"]

MAIN = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="intel_iommu=on hugepages=64"\n'
DROPIN = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=32"\n'
REQUIRED = ["intel_iommu=on", "iommu=pt", "hugepagesz=1G", "hugepages=128"]
# A drop-in name of NAME_MAX (255) bytes: readable, but no temporary file beside it can be made
# (ENAMETOOLONG), which is how a write fails even for root.
LONG_DROPIN = "z" * 251 + ".cfg"


def assert_untouched(top, before):
    after = snapshot(top)
    leftovers = sorted(p for p in after if "gpufleet-new" in p or p.endswith(".tmp"))
    assert leftovers == [], "temporary files left: %s" % leftovers
    assert after == before, "changed before failing: %s" % sorted(
        p for p in set(after) | set(before) if after.get(p) != before.get(p))


def _grub_tree(tmp_path, main=MAIN, dropins=None):
    root = tmp_path / "root"
    (root / "etc/default/grub.d").mkdir(parents=True)
    (root / "etc/default/grub").write_bytes(main if isinstance(main, bytes) else main.encode())
    for name, text in (dropins or {"50-cloudimg-settings.cfg": DROPIN}).items():
        (root / "etc/default/grub.d" / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    hw = tmp_path / "hw"
    (hw / "proc/sys/kernel").mkdir(parents=True)
    (hw / "proc/cmdline").write_text("BOOT_IMAGE=/boot/vmlinuz ro quiet\n")
    (hw / "proc/sys/kernel/osrelease").write_text("6.8.0-40-generic\n")
    return root, hw


def _cmdline_args(root, hw, **kw):
    args = {"required": REQUIRED, "root": str(root), "hardware_root": str(hw), "grub_cfg": "", "regenerate": ["true"]}
    args.update(kw)
    return args


def _refused_in_both_modes(run_module, clear_error, tmp_path, name, args, *names):
    before = snapshot(tmp_path)
    for check in (True, False):
        outcome = run_module(name, args, check=check)
        clear_error(outcome, *names)
        assert_untouched(tmp_path, before)
    return outcome


# ---------------------------------------------------------------- kernel_cmdline

def test_sane_tree_is_edited(run_module, succeeded, tmp_path):
    """The baseline the hostile cases differ from: the same tree, well formed, is edited."""
    root, hw = _grub_tree(tmp_path)
    outcome = run_module("kernel_cmdline", _cmdline_args(root, hw))
    succeeded(outcome)
    assert outcome["changed"] and outcome["files"] == ["etc/default/grub", "etc/default/grub.d/50-cloudimg-settings.cfg"]
    assert "hugepages=128" in (root / "etc/default/grub").read_text()


@pytest.mark.parametrize("main, words", [
    (b"\x00" * 4096, ["etc/default/grub", "binary"]),
    (MAIN.encode() + b"\x00\x00\x00", ["etc/default/grub", "binary", "offset %d" % len(MAIN)]),
    (b"\x7fELF\x02\x01\x01" + bytes(range(256)), ["etc/default/grub", "binary"]),
    (MAIN.encode() + b"# caf\xe9\n", ["etc/default/grub", "not utf-8"]),
], ids=["nul-filled", "nul-tail", "elf", "latin-1"])
def test_binary_main_source_is_refused_not_appended_to(run_module, clear_error, tmp_path, main, words):
    root, hw = _grub_tree(tmp_path, main=main)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline", _cmdline_args(root, hw), *words)


def test_binary_dropin_is_refused(run_module, clear_error, tmp_path):
    root, hw = _grub_tree(tmp_path, dropins={"50-cloudimg-settings.cfg": DROPIN, "60-junk.cfg": b"\x00" * 512})
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline", _cmdline_args(root, hw),
                           "etc/default/grub.d/60-junk.cfg", "binary")


@pytest.mark.parametrize("main, words", [
    ('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet\nGRUB_CMDLINE_LINUX="x"\n', ["etc/default/grub", "line 3"]),
    ("GRUB_DEFAULT=0\nGRUB_DISTRIBUTOR='Ubuntu\n" + MAIN, ["etc/default/grub", "line 2", "unterminated"]),
    ("GRUB_DISTRIBUTOR=`lsb_release -i -s\n" + MAIN, ["etc/default/grub", "line 1", "unterminated"]),
    ('GRUB_CMDLINE_LINUX = "quiet"\n', ["etc/default/grub", "line 1", "GRUB_CMDLINE_LINUX"]),
    ('GRUB_CMDLINE_LINUX+="quiet"\n', ["etc/default/grub", "line 1", "NAME=value"]),
    ('GRUB_CMDLINE_LINUX_DEFAULT "quiet"\n', ["etc/default/grub", "line 1", "GRUB_CMDLINE_LINUX_DEFAULT"]),
    ('export GRUB_CMDLINE_LINUX\n', ["etc/default/grub", "line 1"]),
    ('GRUB_CMDLINE_LINUX="a b" extra\n', ["etc/default/grub", "line 1"]),
], ids=["unterminated-cmdline", "unterminated-other-line", "unterminated-backtick", "blanks-around-equals",
        "plus-equals", "no-equals", "bare-export", "text-after-value"])
def test_source_that_is_not_shell_assignments_is_refused_naming_the_line(run_module, clear_error, tmp_path, main, words):
    root, hw = _grub_tree(tmp_path, main=main)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline", _cmdline_args(root, hw), *words)


def test_quotes_inside_comments_and_backticks_that_close_are_fine(run_module, succeeded, tmp_path):
    main = ("# If you change this file, run 'update-grub' afterwards\n"
            "# you can see them in real GRUB with the command `vbeinfo'\n"
            "GRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`\n" + MAIN)
    root, hw = _grub_tree(tmp_path, main=main)
    succeeded(run_module("kernel_cmdline", _cmdline_args(root, hw)))


@pytest.mark.parametrize("regenerate, words", [
    (["gpufleet-no-such-update-grub"], ["gpufleet-no-such-update-grub", "not found"]),
    (["/nonexistent/sbin/update-grub"], ["/nonexistent/sbin/update-grub", "not found"]),
    ([""], ["regenerate"]),
    (["/etc"], ["/etc", "not found or not executable"]),
], ids=["not-on-path", "absolute-missing", "empty", "a-folder"])
def test_missing_regenerate_program_is_found_before_any_edit(run_module, clear_error, tmp_path, regenerate, words):
    root, hw = _grub_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline",
                           _cmdline_args(root, hw, regenerate=regenerate), *words)


@pytest.mark.parametrize("field, value, words", [
    ("required", ['quiet"\nGRUB_DEFAULT="saved'], ["required", "quiet"]),
    ("required", ["a b"], ["required", "a b"]),
    ("required", ["$(reboot)"], ["required", "$(reboot)"]),
    ("required", [""], ["required"]),
    ("required", ["x" * 5000], ["required"]),
    ("forbidden", ["pci=noats\t"], ["forbidden", "pci=noats"]),
    ("allow_repeated", ["`id`"], ["allow_repeated", "`id`"]),
    ("required", {"a": 1}, ["required"]),
    ("required", [["nested"]], ["required"]),
    ("regenerate", {"x": 1}, ["regenerate"]),
], ids=["newline-quote", "blank", "command-substitution", "empty", "huge", "tab", "backtick", "dict", "nested",
        "regenerate-dict"])
def test_garbage_parameters_never_reach_the_sources(run_module, clear_error, tmp_path, field, value, words):
    root, hw = _grub_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline",
                           _cmdline_args(root, hw, **{field: value}), *words)


def test_write_error_names_the_path_and_restores_what_was_written(run_module, clear_error, tmp_path):
    """/etc/default/grub is written first; the drop-in after it cannot be: both end as they were."""
    root, hw = _grub_tree(tmp_path, dropins={LONG_DROPIN: DROPIN})
    before = snapshot(tmp_path)
    outcome = run_module("kernel_cmdline", _cmdline_args(root, hw))
    clear_error(outcome, LONG_DROPIN, "cannot write", "restored etc/default/grub")
    assert_untouched(tmp_path, before)


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), ["etc/default/grub", "folder"]),
    (lambda p: os.mkfifo(str(p)), ["etc/default/grub", "fifo"]),
    (lambda p: os.symlink("grub", str(p)), ["etc/default/grub", "symlink loop"]),
], ids=["folder", "fifo", "symlink-loop"])
def test_main_source_that_is_no_file_is_refused(run_module, clear_error, tmp_path, make, words):
    root, hw = _grub_tree(tmp_path)
    (root / "etc/default/grub").unlink()
    make(root / "etc/default/grub")
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline", _cmdline_args(root, hw), *words)


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), ["etc/default/grub.d/70-x.cfg", "folder"]),
    (lambda p: os.mkfifo(str(p)), ["etc/default/grub.d/70-x.cfg", "fifo"]),
    (lambda p: os.symlink("70-x.cfg", str(p)), ["etc/default/grub.d/70-x.cfg", "symlink loop"]),
], ids=["folder", "fifo", "symlink-loop"])
def test_dropin_that_is_no_file_is_refused(run_module, clear_error, tmp_path, make, words):
    root, hw = _grub_tree(tmp_path)
    make(root / "etc/default/grub.d/70-x.cfg")
    _refused_in_both_modes(run_module, clear_error, tmp_path, "kernel_cmdline", _cmdline_args(root, hw), *words)


def test_root_that_is_a_file_or_missing(run_module, clear_error, tmp_path):
    (tmp_path / "afile").write_text("x")
    for root in (tmp_path / "afile", tmp_path / "nowhere"):
        clear_error(run_module("kernel_cmdline", _cmdline_args(root, tmp_path)), "etc/default/grub", "missing")


# ---------------------------------------------------------------- grub_default

GRUB_CFG = """set default="0"
menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-u' {
        linux   /boot/vmlinuz-6.8.0-45-generic root=UUID=u ro quiet
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-u' {
        menuentry 'Ubuntu, with Linux 6.8.0-45-generic' $menuentry_id_option 'gnulinux-6.8.0-45-generic-advanced-u' {
                linux   /boot/vmlinuz-6.8.0-45-generic root=UUID=u ro quiet
        }
        menuentry 'Ubuntu, with Linux 6.8.0-40-generic' $menuentry_id_option 'gnulinux-6.8.0-40-generic-advanced-u' {
                linux   /boot/vmlinuz-6.8.0-40-generic root=UUID=u ro quiet
        }
}
"""


def _default_tree(tmp_path, main=MAIN, dropins=None, cfg=GRUB_CFG):
    root, hw = _grub_tree(tmp_path, main=main, dropins=dropins or {})
    (root / "boot/grub").mkdir(parents=True)
    (root / "boot/grub/grub.cfg").write_text(cfg)
    for release in ("6.8.0-45-generic", "6.8.0-40-generic"):
        (root / "boot" / ("vmlinuz-" + release)).write_text("kernel")
    return root, hw


def _default_args(root, hw, **kw):
    # the older kernel is wanted: GRUB_DEFAULT must be set (update-grub is a no-op stand-in)
    args = {"release": "6.8.0-40-generic", "root": str(root), "hardware_root": str(hw), "regenerate": ["true"]}
    args.update(kw)
    return args


def test_grub_default_sane_tree_sets_the_default(run_module, succeeded, tmp_path):
    root, hw = _default_tree(tmp_path)
    outcome = run_module("grub_default", _default_args(root, hw))
    # the stand-in does not regenerate, so the check after it fails; but the source was set first
    assert 'GRUB_DEFAULT="gnulinux-advanced-u>gnulinux-6.8.0-40-generic-advanced-u"' in (root / "etc/default/grub").read_text()
    assert not outcome["_traceback"]
    outcome = run_module("grub_default", _default_args(root, hw, release="6.8.0-45-generic"), check=True)
    succeeded(outcome)


@pytest.mark.parametrize("main, words", [
    ('GRUB_DEFAULT="0\nGRUB_TIMEOUT=5\n', ["etc/default/grub", "line 1", "unterminated"]),
    ("GRUB_DEFAULT='saved\n", ["etc/default/grub", "line 1", "unterminated"]),
    ("GRUB_TIMEOUT=5\nGRUB_DEFAULT = 0\n", ["etc/default/grub", "line 2", "GRUB_DEFAULT"]),
    (b"\x00" * 100, ["etc/default/grub", "binary"]),
    (b"GRUB_DEFAULT=0\n\xff\xfe\n", ["etc/default/grub", "not utf-8"]),
], ids=["unterminated-double", "unterminated-single", "blanks-around-equals", "nul-filled", "not-utf8"])
def test_grub_default_never_rewrites_a_source_it_cannot_parse(run_module, clear_error, tmp_path, main, words):
    root, hw = _default_tree(tmp_path, main=main)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "grub_default", _default_args(root, hw), *words)


@pytest.mark.parametrize("release", ["../../etc/passwd", "6.8.0 -45", "", "-k", "a\nb", "6.8.0-40-generic\n", "x" * 300],
                         ids=["traversal", "blank", "empty", "option", "newline", "trailing-newline", "huge"])
def test_grub_default_refuses_a_release_that_is_no_release(run_module, clear_error, tmp_path, release):
    root, hw = _default_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "grub_default", _default_args(root, hw, release=release),
                           "kernel release")


def test_grub_default_missing_regenerate_program_is_found_first(run_module, clear_error, tmp_path):
    root, hw = _default_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "grub_default",
                           _default_args(root, hw, regenerate=["gpufleet-no-such-update-grub"]), "gpufleet-no-such-update-grub")
    _refused_in_both_modes(run_module, clear_error, tmp_path, "grub_default", _default_args(root, hw, regenerate=[]),
                           "regenerate")


def test_grub_default_menu_id_that_would_inject_is_refused(run_module, clear_error, tmp_path):
    cfg = GRUB_CFG.replace("gnulinux-6.8.0-40-generic-advanced-u", 'gnulinux-6.8.0-40-generic-advanced-u"$(reboot)"')
    root, hw = _default_tree(tmp_path, cfg=cfg)
    before = snapshot(tmp_path)
    clear_error(run_module("grub_default", _default_args(root, hw)), "GRUB_DEFAULT", "$(reboot)")
    assert_untouched(tmp_path, before)


def test_grub_default_write_error_names_the_path(run_module, clear_error, tmp_path):
    root, hw = _default_tree(tmp_path, dropins={LONG_DROPIN: "GRUB_DEFAULT=0\n"})
    before = snapshot(tmp_path)
    clear_error(run_module("grub_default", _default_args(root, hw)), LONG_DROPIN, "cannot write")
    assert_untouched(tmp_path, before)


@pytest.mark.parametrize("field, value", [("grub_cfg", "boot/grub"), ("grub_cfg", "../../../../etc/hostname"),
                                          ("hardware_root", "/nonexistent"), ("regenerate", "true")])
def test_grub_default_odd_options_end_clearly(run_module, tmp_path, field, value):
    root, hw = _default_tree(tmp_path)
    outcome = run_module("grub_default", _default_args(root, hw, **{field: value}), check=True)
    assert not outcome["_traceback"], outcome["_stderr"]


# ---------------------------------------------------------------- roce_rails

RAIL = {"interface": "ens1f0np0", "cidr": "10.64.0.2/20", "mtu": 9000, "rail": 0,
        "routes": [{"to": "10.64.0.0/12", "via": "10.64.0.1"}]}
QOS = {"trust": "dscp", "dscp": 26, "pfc_priority": 3, "pfc": "0,0,0,1,0,0,0,0", "ecn": True, "tos": 106}


def _roce_tree(tmp_path, style="netplan"):
    root = tmp_path / "root"
    if style == "netplan":
        (root / "etc/netplan").mkdir(parents=True)
        (root / "etc/netplan/50-cloud-init.yaml").write_text("network: {version: 2}\n")
    else:
        (root / "etc/network").mkdir(parents=True)
        (root / "etc/network/interfaces").write_text("source /etc/network/interfaces.d/*\n")
    hw = tmp_path / "hw"
    hw.mkdir()
    return root, hw


def _roce_args(root, hw, rails=None, **kw):
    args = {"rails": [dict(RAIL)] if rails is None else rails, "root": str(root), "hardware_root": str(hw),
            "runtime": False}
    args.update(kw)
    return args


def test_roce_sane_rail_is_written(run_module, succeeded, tmp_path):
    root, hw = _roce_tree(tmp_path)
    outcome = run_module("roce_rails", _roce_args(root, hw, qos=QOS))
    succeeded(outcome)
    assert "addresses: [10.64.0.2/20]" in (root / "etc/netplan/60-gpufleet-roce.yaml").read_text()
    assert oct((root / "etc/netplan/60-gpufleet-roce.yaml").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("change, words", [
    ({"cidr": "999.1.1.1/99"}, ["rail 0", "ens1f0np0", "999.1.1.1/99"]),
    ({"cidr": "10.64.0.2/0"}, ["rail 0", "10.64.0.2/0"]),
    ({"cidr": "10.64.0.2"}, ["rail 0", "cidr", "10.64.0.2"]),
    ({"cidr": "10.64.0.2/20]\n    evil: [1"}, ["rail 0", "cidr"]),
    ({"cidr": "fe80::1/64"}, ["rail 0", "fe80::1/64"]),
    ({"cidr": 42}, ["rail 0", "cidr"]),
    ({"mtu": -1}, ["rail 0", "ens1f0np0", "mtu", "-1"]),
    ({"mtu": 100000}, ["rail 0", "mtu", "100000"]),
    ({"mtu": "abc"}, ["rail 0", "ens1f0np0", "mtu", "abc"]),
    ({"mtu": True}, ["rail 0", "mtu", "true"]),
    ({"mtu": 9000.5}, ["rail 0", "mtu", "9000.5"]),
    ({"interface": "ens1\n  evil: x"}, ["rail 0", "interface", "ens1"]),
    ({"interface": "ens1/../x"}, ["rail 0", "interface", "ens1/../x"]),
    ({"interface": "ens1\n"}, ["rail 0", "interface", "ens1"]),
    ({"interface": "ens 1"}, ["rail 0", "interface", "ens 1"]),
    ({"interface": "a" * 16}, ["rail 0", "interface", "a" * 16, "ifnamsiz"]),
    ({"interface": ".."}, ["rail 0", "interface", ".."]),
    ({"interface": "-j"}, ["rail 0", "interface", "-j"]),
    ({"interface": ""}, ["rail 0", "interface"]),
    ({"routes": [{"to": "10.0.0.0/8", "via": "10.64.0.1\n"}]}, ["rail 0", "via"]),
    ({"routes": [{"to": "10.0.0.0/33", "via": "10.64.0.1"}]}, ["rail 0", "10.0.0.0/33"]),
    ({"routes": [{"to": "10.0.0.0/8"}]}, ["rail 0", "route"]),
    ({"routes": ["10.0.0.0/8"]}, ["rail", "routes"]),
], ids=["bad-address", "prefix-0", "no-prefix", "yaml-injection", "ipv6", "int-cidr", "mtu-negative", "mtu-huge",
        "mtu-text", "mtu-bool", "mtu-float", "ifname-newline", "ifname-slash", "ifname-trailing-newline", "ifname-space", "ifname-16-bytes",
        "ifname-dotdot", "ifname-option", "ifname-empty", "route-via-newline", "route-prefix-33", "route-no-via",
        "route-not-mapping"])
@pytest.mark.parametrize("style", ["netplan", "ifupdown"])
def test_roce_bad_rail_is_refused_naming_rail_and_value(run_module, clear_error, tmp_path, change, words, style):
    root, hw = _roce_tree(tmp_path, style)
    rail = dict(RAIL, **change)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails",
                           _roce_args(root, hw, [rail], style=style, qos=QOS), *words)


@pytest.mark.parametrize("name", ["1234", "null", "true", "0x1f"], ids=["int", "null", "bool", "hex"])
def test_roce_interface_yaml_reads_as_another_type_is_not_written(run_module, clear_error, tmp_path, name):
    """A legal Linux name that YAML takes for a number, null or a boolean: the validator reading the
    netplan file back refuses it, so netplan never sees a file that configures something else."""
    root, hw = _roce_tree(tmp_path)
    before = snapshot(tmp_path)
    clear_error(run_module("roce_rails", _roce_args(root, hw, [dict(RAIL, interface=name)])),
                "etc/netplan/60-gpufleet-roce.yaml", "not written")
    assert_untouched(tmp_path, before)


@pytest.mark.parametrize("qos, words", [
    ({k: v for k, v in QOS.items() if k != "pfc"}, ["qos", "pfc", "missing"]),
    ({k: v for k, v in QOS.items() if k != "tos"}, ["qos", "tos", "missing"]),
    ({}, ["qos", "missing"]),
    (dict(QOS, trust="dscp; reboot"), ["qos.trust", "dscp; reboot"]),
    (dict(QOS, pfc="0,0,0,1"), ["qos.pfc", "0,0,0,1"]),
    (dict(QOS, pfc="0,0,0,1,0,0,0,0 && reboot"), ["qos.pfc"]),
    (dict(QOS, dscp=64), ["qos.dscp", "64"]),
    (dict(QOS, pfc_priority=8), ["qos.pfc_priority", "8"]),
    (dict(QOS, pfc_priority="3;id"), ["qos.pfc_priority"]),
    (dict(QOS, ecn="yes please"), ["qos.ecn"]),
    (dict(QOS, tos=-1), ["qos.tos", "-1"]),
    (dict(QOS, typo=1), ["qos", "typo"]),
], ids=["no-pfc", "no-tos", "empty", "trust-injection", "pfc-short", "pfc-injection", "dscp-64", "prio-8",
        "prio-text", "ecn-text", "tos-negative", "unknown-key"])
def test_roce_bad_qos_is_refused_naming_the_key(run_module, clear_error, tmp_path, qos, words):
    root, hw = _roce_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails", _roce_args(root, hw, qos=qos), *words)


@pytest.mark.parametrize("interfaces", [["../../etc"], ["ens1 ens2"], ["x" * 40], [""]],
                         ids=["traversal", "blank", "long", "empty"])
def test_roce_qos_only_interfaces_are_checked(run_module, clear_error, tmp_path, interfaces):
    root, hw = _roce_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails",
                           _roce_args(root, hw, [], interfaces=interfaces, qos=QOS), "interfaces")


def test_roce_two_rails_one_interface(run_module, clear_error, tmp_path):
    root, hw = _roce_tree(tmp_path)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails",
                           _roce_args(root, hw, [dict(RAIL), dict(RAIL, rail=1, cidr="10.80.0.2/20")]),
                           "ens1f0np0", "two rails")


@pytest.mark.parametrize("rel", ["etc/netplan/60-gpufleet-roce.yaml", "usr/local/sbin/gpufleet-roce-qos",
                                 "etc/systemd/system/gpufleet-roce-qos.service"])
@pytest.mark.parametrize("make", [lambda p: p.mkdir(parents=True), lambda p: os.mkfifo(str(p)),
                                  lambda p: os.symlink(p.name, str(p))], ids=["folder", "fifo", "symlink-loop"])
def test_roce_owned_file_that_is_no_regular_file(run_module, clear_error, tmp_path, rel, make):
    root, hw = _roce_tree(tmp_path)
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    make(root / rel)
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails", _roce_args(root, hw, qos=QOS),
                           rel, "not a regular file")


def test_roce_folder_under_a_file(run_module, clear_error, tmp_path):
    """ifupdown's interfaces.d is a regular file: its folder cannot be made (ENOTDIR, even for root)."""
    root, hw = _roce_tree(tmp_path, "ifupdown")
    (root / "etc/network/interfaces.d").write_text("not a folder")
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails", _roce_args(root, hw, style="ifupdown"),
                           "etc/network/interfaces.d", "not a folder")


@pytest.mark.parametrize("field, value", [("rails", "ens1f0np0"), ("rails", [["x"]]), ("rails", [{"cidr": "1.2.3.4/8"}]),
                                          ("style", "yaml"), ("gid_type", "RoCE v3"), ("qos", "dscp"),
                                          ("qos", [1, 2]), ("runtime", "maybe")],
                         ids=["rails-text", "rails-nested", "rails-no-interface", "style", "gid", "qos-text",
                              "qos-list", "runtime-text"])
def test_roce_wrong_types_are_clear_errors(run_module, clear_error, tmp_path, field, value):
    root, hw = _roce_tree(tmp_path)
    # Ansible's own argument check says "dictionary requested, could not parse JSON or key=value" for
    # a text element of a list of dicts, without the option's name: a clear failure all the same
    names = ["dictionary requested"] if (field, value) == ("rails", "ens1f0np0") else [field]
    _refused_in_both_modes(run_module, clear_error, tmp_path, "roce_rails", _roce_args(root, hw, **{field: value}), *names)


@pytest.mark.parametrize("name, field", [("kernel_cmdline", "root"), ("kernel_cmdline", "hardware_root"),
                                         ("kernel_cmdline", "grub_cfg"), ("grub_default", "root"),
                                         ("grub_default", "grub_cfg"), ("roce_rails", "root"), ("roce_rails", "ip")])
def test_nul_in_a_path_option(run_module, clear_error, tmp_path, name, field):
    """A NUL byte makes every file call raise ValueError: refused by name before any is made."""
    if name == "roce_rails":
        root, hw = _roce_tree(tmp_path)
        args = _roce_args(root, hw)
    else:
        root, hw = _grub_tree(tmp_path)
        args = _cmdline_args(root, hw) if name == "kernel_cmdline" else _default_args(root, hw)
    args[field] = "/tmp/x\x00y"
    _refused_in_both_modes(run_module, clear_error, tmp_path, name, args, field, "NUL")
