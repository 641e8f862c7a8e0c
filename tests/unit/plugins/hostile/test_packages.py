"""Hostile input against what pins packages and loads driver modules: package_pins (names that
reach the apt preferences file's path and text, apt's and dnf's argv) and driver_state (arguments,
the modules-load.d file).

The node is a temporary folder plus stand-ins for apt-cache, dpkg-query, apt-mark, apt-get,
modinfo and modprobe on PATH; each stand-in records its call, so "nothing changed" also means no
changing command ran. Each case asserts a clear error naming the option, pin or path and the value,
the same in check mode, with the files as they were; or the documented right result.
"""
import os

import pytest

from tests.unit.plugins.hostile._tree import snapshot  # noqa: E402  (the repository is on sys.path: tests/conftest.py)

COVERS = ["module:package_pins", "module:driver_state"]

KERNEL = "6.8.0-45-generic"
APT_CACHE = """#!/bin/sh
echo "apt-cache $*" >> "%(log)s"
[ "$1" = madison ] || exit 0
shift
for name in "$@"; do echo "$name | 1.0-1 | http://archive.example/ubuntu jammy/main amd64 Packages"; done
"""
RECORD = """#!/bin/sh
echo "%(name)s $*" >> "%(log)s"
"""
MODINFO = """#!/bin/sh
[ "$2" = "%s" ] || exit 1
echo "filename:       /lib/modules/$2/updates/dkms/$3.ko"
echo "version:        550.90.07"
echo "vermagic:       $2 SMP preempt mod_unload modversions"
""" % KERNEL


def _tool(folder, name, text):
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def apt_node(tmp_path):
    """(env, prefs folder, log): a node whose repository offers every name at 1.0-1, nothing installed."""
    tools, prefs, log = tmp_path / "bin", tmp_path / "preferences.d", tmp_path / "calls.log"
    tools.mkdir()
    prefs.mkdir()
    log.write_text("")
    _tool(tools, "apt-cache", APT_CACHE % {"log": log})
    for name in ("dpkg-query", "apt-mark", "apt-get"):
        _tool(tools, name, RECORD % {"name": name, "log": log})
    # installing NAME=VERSION installs it: dpkg-query reads it back
    state = tmp_path / "dpkg.status"
    state.write_text("")
    with open(str(tools / "apt-get"), "a") as handle:
        handle.write('[ "$1" = install ] || exit 0\nfor a in "$@"; do case "$a" in *=*) '
                     'printf "%%s\\t%%s\\tii \\n" "${a%%%%=*}" "${a#*=}" >> "%s";; esac; done\n' % state)
    with open(str(tools / "dpkg-query"), "a") as handle:
        handle.write('cat "%s"\n' % state)
    env = {"PATH": "%s:%s" % (tools, os.environ["PATH"])}
    return env, prefs, log


def _changing_calls(log):
    return [line for line in log.read_text().splitlines()
            if line.split()[:2] in (["apt-mark", "hold"], ["apt-mark", "unhold"]) or
            (line.startswith("apt-get") and " -s " not in " %s " % line)]


PIN = {"name": "nvidia-driver-550-server", "version": "1.0", "replaces": ["nvidia-driver-[0-9]*"]}


def _pin_args(prefs, **kw):
    args = {"pins": [dict(PIN)], "manager": "apt", "set_name": "gpufleet-test", "preferences_dir": str(prefs)}
    args.update(kw)
    return args


def _refused(run_module, clear_error, tmp_path, name, args, env, *names):
    before = snapshot(tmp_path)
    for check in (True, False):
        outcome = run_module(name, args, check=check, env=env)
        clear_error(outcome, *names)
        after = snapshot(tmp_path)
        after.pop("calls.log", None)
        expected = dict(before)
        expected.pop("calls.log", None)
        assert after == expected, "changed before failing"
    return outcome


# ---------------------------------------------------------------- package_pins

def test_sane_pins_write_the_preferences_file(run_module, succeeded, apt_node):
    env, prefs, log = apt_node
    outcome = run_module("package_pins", _pin_args(prefs), env=env)
    succeeded(outcome)
    text = (prefs / "gpufleet-test.pref").read_text()
    assert "Package: nvidia-driver-550-server\nPin: version 1.0-1\nPin-Priority: 1001\n" in text
    assert os.listdir(str(prefs)) == ["gpufleet-test.pref"]          # no temporary file left
    assert any(line.startswith("apt-get install") for line in log.read_text().splitlines())


@pytest.mark.parametrize("set_name", ["../evil", "a/b", "/etc/apt/x", "a\x00b", "a\nb", "", ".hidden", "..",
                                      "x" * 200, "with space", "gpufleet.pref\nPackage: *"],
                         ids=["parent", "slash", "absolute", "nul", "newline", "empty", "hidden", "dotdot", "huge",
                              "space", "injection"])
def test_set_name_that_is_no_file_name_is_refused(run_module, clear_error, tmp_path, apt_node, set_name):
    env, prefs, log = apt_node
    _refused(run_module, clear_error, tmp_path, "package_pins", _pin_args(prefs, set_name=set_name), env, "set_name")
    assert log.read_text() == ""                                      # refused before any command


@pytest.mark.parametrize("pin, words", [
    (dict(PIN, name="nvidia driver"), ["pins[0].name", "nvidia driver"]),
    (dict(PIN, name="x\nPin-Priority: 1001"), ["pins[0].name"]),
    (dict(PIN, name="-oDebug::pkgProblemResolver=1"), ["pins[0].name"]),
    (dict(PIN, name="../../etc/passwd"), ["pins[0].name"]),
    (dict(PIN, version="1.0\nPackage: *\nPin: release *"), ["pins[0]", "version"]),
    (dict(PIN, version="1.0 2.0"), ["version", "1.0 2.0"]),
    (dict(PIN, version="$(reboot)"), ["version", "$(reboot)"]),
    (dict(PIN, replaces=["a b"]), ["replaces", "a b"]),
    (dict(PIN, replaces=["x\ny"]), ["replaces"]),
    (dict(PIN, replaces=[""]), ["replaces"]),
    ({"name": ""}, ["pins[0]", "name"]),
], ids=["name-space", "name-newline", "name-option", "name-path", "version-newline", "version-space",
        "version-substitution", "replaces-space", "replaces-newline", "replaces-empty", "name-empty"])
def test_pin_words_that_would_inject_are_refused(run_module, clear_error, tmp_path, apt_node, pin, words):
    env, prefs, log = apt_node
    _refused(run_module, clear_error, tmp_path, "package_pins", _pin_args(prefs, pins=[pin]), env, *words)
    assert log.read_text() == ""


def _no_text_file(name, start):
    """(make, words) cases of a file the module reads that is no text file: each makes ``name`` a
    folder, a FIFO, a symlink loop, NUL bytes, or ``start`` followed by bytes that are not UTF-8."""
    return [
        (lambda p: p.mkdir(), [name, "folder"]),
        (lambda p: os.mkfifo(str(p)), [name, "fifo"]),
        (lambda p: os.symlink(name, str(p)), [name, "symlink loop"]),
        (lambda p: p.write_bytes(b"\x00" * 64), [name, "binary"]),
        (lambda p: p.write_bytes(start + b"\xff\xfe"), [name, "utf-8"]),
    ]


NO_TEXT_IDS = ["folder", "fifo", "symlink-loop", "nul", "not-utf8"]


@pytest.mark.parametrize("make, words", _no_text_file("gpufleet-test.pref", b"Package: x\n"), ids=NO_TEXT_IDS)
def test_preferences_file_that_is_no_text_file_is_left_alone(run_module, clear_error, tmp_path, apt_node, make, words):
    env, prefs, log = apt_node
    make(prefs / "gpufleet-test.pref")
    _refused(run_module, clear_error, tmp_path, "package_pins", _pin_args(prefs), env, *words)
    assert _changing_calls(log) == []


@pytest.mark.parametrize("where, words", [
    ("afile", ["preferences_dir", "afile", "not a folder"]),
    ("afile/preferences.d", ["preferences_dir", "afile", "not a folder"]),
    ("pre\x00fs", ["preferences_dir", "not a folder path"]),
], ids=["a-file", "under-a-file", "nul"])
def test_preferences_dir_that_cannot_hold_the_file(run_module, clear_error, tmp_path, apt_node, where, words):
    env, _prefs, log = apt_node
    (tmp_path / "afile").write_text("x")
    _refused(run_module, clear_error, tmp_path, "package_pins", _pin_args(tmp_path / where), env, *words)
    assert log.read_text() == ""


@pytest.mark.parametrize("field, value", [("pins", "nvidia"), ("pins", [1]), ("pins", [{"name": ["x"]}]),
                                          ("pins", [{"version": "1.0"}]), ("state", "absent"), ("manager", "yum"),
                                          ("update_cache", "maybe"), ("set_name", ["a"]), ("pins", None)],
                         ids=["pins-text", "pins-int", "name-list", "no-name", "state", "manager", "update-cache",
                              "set-name-list", "pins-none"])
def test_package_pins_wrong_types(run_module, clear_error, tmp_path, apt_node, field, value):
    env, prefs, log = apt_node
    # Ansible's own argument check says "dictionary requested, could not parse JSON or key=value" for
    # a text element of a list of dicts, without the option's name: a clear failure all the same
    names = ["dictionary requested"] if (field, value) == ("pins", "nvidia") else [field]
    _refused(run_module, clear_error, tmp_path, "package_pins", _pin_args(prefs, **{field: value}), env, *names)
    assert _changing_calls(log) == []


def test_duplicate_pins_are_refused(run_module, clear_error, tmp_path, apt_node):
    env, prefs, log = apt_node
    _refused(run_module, clear_error, tmp_path, "package_pins", _pin_args(prefs, pins=[dict(PIN), dict(PIN)]), env,
             "nvidia-driver-550-server", "twice")


# ---------------------------------------------------------------- driver_state

@pytest.fixture
def driver_node(tmp_path):
    """(root, env, conf): the pinned driver runs with nvidia-peermem; modules-load.d under tmp_path."""
    root, tools = tmp_path / "root", tmp_path / "bin"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(KERNEL + "\n")
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("550.90.07\n")
    (root / "sys/module/nvidia_peermem").mkdir(parents=True)
    tools.mkdir()
    _tool(tools, "modinfo", MODINFO)
    _tool(tools, "modprobe", "#!/bin/sh\nexit 1\n")
    (tmp_path / "etc/modules-load.d").mkdir(parents=True)
    return root, {"PATH": "%s:%s" % (tools, os.environ["PATH"])}, tmp_path / "etc/modules-load.d/nvidia-peermem.conf"


def _driver_args(root, conf, **kw):
    args = {"root": str(root), "area": "nvidia", "driver_version": "550.90.07", "peermem_at_boot": str(conf)}
    args.update(kw)
    return args


def test_driver_state_sane_call_writes_the_file(run_module, succeeded, driver_node):
    root, env, conf = driver_node
    outcome = run_module("driver_state", _driver_args(root, conf), env=env)
    succeeded(outcome)
    assert outcome["peermem_at_boot"] == "write" and conf.read_text().endswith("nvidia-peermem\n")
    assert os.listdir(str(conf.parent)) == ["nvidia-peermem.conf"]


@pytest.mark.parametrize("field, value, words", [
    ("driver_version", "latest", ["driver_version", "latest"]),
    ("driver_version", "550.90.07\nnvidia-peermem", ["driver_version"]),
    ("driver_version", "", ["driver_version"]),
    ("driver_version", "-k", ["driver_version", "-k"]),
    ("kernel_release", "../../../etc", ["kernel_release", "../../../etc"]),
    ("kernel_release", "-v", ["kernel_release", "-v"]),
    ("kernel_release", "6.8 .0", ["kernel_release"]),
    ("ofed_release", "23.10;reboot", ["ofed_release", "23.10;reboot"]),
    ("services", ["--host=evil"], ["services", "--host=evil"]),
    ("services", ["a b"], ["services", "a b"]),
    ("peermem_at_boot", "nvidia-peermem.conf", ["peermem_at_boot", "absolute"]),
    ("peermem_at_boot", "/etc/modules-load.d/", ["peermem_at_boot"]),
    ("peermem_at_boot", "/etc/x\x00.conf", ["peermem_at_boot"]),
    ("root", "/x\x00", ["root", "NUL"]),
], ids=["latest", "version-newline", "version-empty", "version-option", "kernel-traversal", "kernel-option",
        "kernel-blank", "ofed-injection", "service-option", "service-blank", "relative-conf", "conf-folder-path",
        "conf-nul", "root-nul"])
def test_driver_state_arguments_are_checked_before_anything_is_written(run_module, clear_error, tmp_path, driver_node,
                                                                       field, value, words):
    root, env, conf = driver_node
    args = _driver_args(root, conf)
    args[field] = value
    _refused(run_module, clear_error, tmp_path, "driver_state", args, env, *words)
    assert not conf.exists()


@pytest.mark.parametrize("make, words", _no_text_file("nvidia-peermem.conf", b"nvidia-peermem\n"), ids=NO_TEXT_IDS)
def test_modules_load_file_that_is_no_text_file(run_module, clear_error, tmp_path, driver_node, make, words):
    root, env, conf = driver_node
    make(conf)
    _refused(run_module, clear_error, tmp_path, "driver_state", _driver_args(root, conf), env, *words)


def test_modules_load_folder_under_a_file(run_module, clear_error, tmp_path, driver_node):
    root, env, _conf = driver_node
    (tmp_path / "afile").write_text("x")
    conf = tmp_path / "afile/modules-load.d/nvidia-peermem.conf"
    _refused(run_module, clear_error, tmp_path, "driver_state", _driver_args(root, conf), env,
             str(conf), "afile", "not a folder")


def test_problems_fail_before_the_file_is_written(run_module, clear_error, tmp_path, driver_node):
    """The module for the next kernel is missing (modinfo knows only 6.8.0-45): the call fails, and
    the modules-load.d file it would have written is not written."""
    root, env, conf = driver_node
    _refused(run_module, clear_error, tmp_path, "driver_state", _driver_args(root, conf, kernel_release="6.8.0-50-generic"),
             env, "no nvidia kernel module for kernel 6.8.0-50-generic")
    assert not conf.exists()


@pytest.mark.parametrize("rel", ["sys/module/nvidia/version", "proc/sys/kernel/osrelease"])
def test_kernel_attribute_that_is_a_fifo_never_blocks(run_module, tmp_path, driver_node, rel):
    root, env, conf = driver_node
    (root / rel).unlink()
    os.mkfifo(str(root / rel))
    outcome = run_module("driver_state", _driver_args(root, conf, kernel_release=KERNEL), env=env, timeout=20)
    assert not outcome["_traceback"], outcome["_stderr"]


@pytest.mark.parametrize("field, value", [("root", "afile"), ("area", "amd"), ("peermem", "sometimes"),
                                          ("services", {"a": 1}), ("load_now", [1])],
                         ids=["root-file", "area", "peermem-text", "services-dict", "load-now-list"])
def test_driver_state_wrong_types(run_module, clear_error, tmp_path, driver_node, field, value):
    root, env, conf = driver_node
    (tmp_path / "afile").write_text("x")
    args = _driver_args(root, conf)
    args[field] = str(tmp_path / value) if field == "root" else value
    _refused(run_module, clear_error, tmp_path, "driver_state", args, env, field)
    assert not conf.exists()
