# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the OS layer's state for the kernel_cmdline, grub_default and tuning modules.

Every read goes through a ``_node.fs.Root``: the OS files (``etc/default/grub``, ``boot/grub/grub.cfg``)
under the node's root, the kernel's view (``proc/cmdline``, sysfs) under the hardware root (a lab
twin's ``/run/twin``). Decisions are the pure functions of ``grub``, ``cmdline`` and ``nextboot``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline
from ansible_collections.gpufleet.provision.plugins.module_utils._os import grub as _grub
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root, WriteError, atomic_write
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key


_RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}\Z")


class OsLayerError(Exception):
    """A state that cannot be read or acted on; the message names the path and the cause."""


def _fail_on(fs, start=0):
    bad = [p for p in fs.problems[start:] if p["kind"] in ("unreadable", "invalid")]
    if bad:
        raise OsLayerError("; ".join("%s: %s (%s)" % (fs.join(p["path"]), p["detail"], p["kind"]) for p in bad))


def _source_text(fs, rel, data):
    try:
        return _grub.check_text(rel, data)
    except _grub.GrubError as exc:
        raise OsLayerError("%s (%s)" % (exc, fs.join(rel)))


def read_sources(fs):
    """[(rel, text)] in the order update-grub sources them. Raises OsLayerError naming the path when
    one is missing, unreadable, not a regular file, not text, or not something update-grub could
    source as we read it (``grub.check_text``): such a file is never edited."""
    text = fs.read_bytes(_grub.MAIN, optional=True)
    _fail_on(fs)
    if text is None:
        raise OsLayerError("%s: missing (the GRUB sources start there; not a GRUB system?)" % fs.join(_grub.MAIN))
    sources = [(_grub.MAIN, _source_text(fs, _grub.MAIN, text))]
    for name in fs.listdir(_grub.DROPINS):
        if name.endswith(".cfg"):
            rel = _grub.DROPINS + "/" + name
            data = fs.read_bytes(rel)
            if data is not None:
                sources.append((rel, _source_text(fs, rel, data)))
    _fail_on(fs)
    return sources


def read_entry(fs, grub_cfg, grubenv=None):
    """The default entry of grub.cfg ({release, args, title}); None when there is no grub.cfg or entry."""
    if not grub_cfg:
        return None
    data = fs.read_bytes(grub_cfg, optional=True)
    _fail_on(fs)
    if data is None:
        return None
    env = fs.read_bytes(grubenv or re.sub(r"[^/]+$", "grubenv", grub_cfg), optional=True)
    return _grub.default_entry(data.decode("utf-8", "replace"), env.decode("utf-8", "replace") if env else None)


def read_cfg(fs, grub_cfg):
    data = fs.read_bytes(grub_cfg, optional=True) if grub_cfg else None
    _fail_on(fs)
    return None if data is None else data.decode("utf-8", "replace")


def running_cmdline(hw):
    """Words of the running kernel's command line (``proc/cmdline``), None when unreadable."""
    text = hw.read("proc/cmdline", optional=True)
    return None if text is None else text.split()


def cmdline_state(os_root, hw_root, rule, grub_cfg):
    """Everything kernel_cmdline decides from: the plan of the GRUB sources, grub.cfg's default
    entry, the running command line. Raises OsLayerError / GrubError naming the path."""
    fs = Root(os_root)
    sources = read_sources(fs)
    try:
        plan = _grub.plan(sources, rule)
    except _grub.GrubError as exc:
        raise OsLayerError(str(exc))
    entry = read_entry(fs, grub_cfg)
    return {"sources": sources, "plan": plan, "entry": entry, "running": running_cmdline(Root(hw_root))}


def needs_regeneration(state, rule):
    """update-grub is needed when a source changes, or when grub.cfg's default entry does not
    give what the sources give (an interrupted run edited the sources but never regenerated)."""
    if state["plan"]["changed"]:
        return True
    entry = state["entry"]
    return entry is not None and _cmdline.owned_view(entry["args"], rule) != _cmdline.owned_view(state["plan"]["after"], rule)


def installed_kernels(fs):
    """Releases with an image in ``boot/`` (``vmlinuz-<release>``), newest first as 10_linux orders them."""
    names = [n[len("vmlinuz-"):] for n in fs.listdir("boot") if n.startswith("vmlinuz-")]
    return sorted(names, key=natural_key, reverse=True)


def default_state(os_root, hw_root, release, grub_cfg):
    """What grub_default decides from: sources, grub.cfg and its default entry, installed kernels,
    the running release."""
    fs = Root(os_root)
    sources = read_sources(fs)
    cfg = read_cfg(fs, grub_cfg)
    running = Root(hw_root).read("proc/sys/kernel/osrelease", optional=True)
    return {"sources": sources, "cfg": cfg, "entry": _grub.default_entry(cfg) if cfg else None,
            "installed": installed_kernels(fs), "running": running, "release": release}


def default_plan(state):
    """{"regenerate": bool, "set_default": value or None, "next": release the next boot will have}.

    The release must be installed (its ``boot/vmlinuz-<release>``) unless ``state["predict"]``
    (check mode, the kernel role's install has not run). grub.cfg without the release's entry is
    regenerated first; when GRUB_DEFAULT then boots another kernel, it is set to the release's own
    menu entry ("submenu>entry" by ids).
    """
    release = state["release"]
    if release not in state["installed"] and not state.get("predict"):
        raise OsLayerError("kernel %s: boot/vmlinuz-%s not installed (installed: %s)" % (
            release, release, ", ".join(state["installed"]) or "none"))
    cfg = state["cfg"]
    has_entry = cfg is not None and _grub.entry_for_release(cfg, release) is not None
    entry = state["entry"]
    if has_entry and entry is not None and entry["release"] == release:
        return {"regenerate": False, "set_default": None, "next": release}
    # After a regeneration, GRUB_DEFAULT=0 boots the newest installed kernel (10_linux's order).
    installed = sorted(set(state["installed"]) | {release}, key=natural_key, reverse=True)
    default = _grub.source_default(state["sources"])
    if default == "0" and installed[0] == release:
        return {"regenerate": True, "set_default": None, "next": release}
    return {"regenerate": True, "set_default": "release", "next": release}


def path_problem(params, names):
    """The first of ``names`` (path options) whose value no path can be, as "option 'value': why";
    None when all can be. A NUL byte makes every file call raise ValueError, not OSError."""
    for name in names:
        value = params.get(name)
        if isinstance(value, str) and "\x00" in value:
            return "%s %r: a NUL byte cannot be in a path" % (name, value)
    return None


def check_program(argv, find):
    """Raise OsLayerError unless the program of ``argv`` can run: an executable file when it is a
    path, else found by ``find(name)`` (AnsibleModule.get_bin_path). Asked before any source is
    edited, so a node without update-grub is refused with its sources as they were."""
    name = argv[0] if argv else ""
    if not name or name != name.strip() or "\x00" in name:
        raise OsLayerError("regenerate %r: no program to run" % (argv,))
    if "/" in name:
        found = name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    else:
        found = find(name)
    if not found:
        raise OsLayerError("%s: not found or not executable (regenerate %s): nothing edited"
                           % (name, " ".join(argv)))


def check_release(release):
    """Raise OsLayerError unless ``release`` is one kernel release (it names ``boot/vmlinuz-<release>``)."""
    if not isinstance(release, str) or not _RELEASE.match(release):
        raise OsLayerError("kernel release %r: not a kernel release (letters, digits, '.', '-', '_', '+', '~'; "
                           "at most 64 characters)" % (release,))


def write_file(path, text):
    """Replace ``path`` atomically (fs.atomic_write: its mode kept, 0644 for a new file); OsLayerError
    naming the path when it cannot be written (nothing changed then)."""
    try:
        atomic_write(path, text)
    except WriteError as exc:
        raise OsLayerError(str(exc))


def write_sources(fs, changed, sources):
    """Write ``changed`` ({rel: text}) under ``fs``, all or none: when one cannot be written, the
    ones written before it get their text of ``sources`` back and OsLayerError names the path."""
    before = dict(sources)
    done = []
    for rel, text in sorted(changed.items()):
        try:
            atomic_write(fs.join(rel), text)
        except WriteError as exc:
            for old in reversed(done):
                try:
                    atomic_write(fs.join(old), before[old])
                except WriteError as again:
                    raise OsLayerError("%s; and %s could not be restored: %s" % (exc, old, again))
            raise OsLayerError("%s%s" % (exc, "; restored %s" % ", ".join(done) if done else ""))
        done.append(rel)
