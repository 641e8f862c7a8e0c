# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ACS boot unit's files in one pass: the boot script, the collection code it runs, its
configuration and the unit, compared by content with what the pcie role ships; only what differs
is written (and the files of earlier releases removed).

One module call instead of a ``copy`` per file: on a converged node, or one booted from a golden
image that holds the unit already, the whole boot unit is one round trip that changes nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import stat
import tempfile


class BootError(ValueError):
    """A boot file cannot be read or written; the message names the path and the cause."""


def read(path):
    """(text, mode) of ``path``; (None, None) when it does not exist."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        return data.decode("utf-8", "replace"), stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None, None
    except (IOError, OSError) as exc:
        raise BootError("%s: cannot be read (%s)" % (path, exc))


def _digest(text):
    return "absent" if text is None else "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def plan(files, absent, reader=read):
    """What differs: one change per file, ``{path, action, mode, before, after, diff}``.

    files: [{path, content, mode ("0644"), diff (bool: show the content, else its hash)}];
    absent: paths that must not exist (code of earlier releases). Action ``create``, ``update``
    (content), ``mode`` (content right, mode not) or ``remove``; files already right are left out.
    """
    changes = []
    for item in files:
        text, mode = reader(item["path"])
        want_mode = int(str(item.get("mode") or "0644"), 8)
        if text == item["content"] and mode == want_mode:
            continue
        action = "create" if text is None else ("update" if text != item["content"] else "mode")
        show = item.get("diff", True)
        changes.append({"path": item["path"], "action": action, "mode": want_mode,
                        "before": (text or "") if show else "%s %s\n" % (item["path"], _digest(text)),
                        "after": item["content"] if show else "%s %s\n" % (item["path"], _digest(item["content"])),
                        "content": item["content"]})
    for path in absent:
        text, _mode = reader(path)
        if text is not None:
            changes.append({"path": path, "action": "remove", "mode": None, "before": "%s %s\n" % (path, _digest(text)),
                            "after": "", "content": None})
    return changes


def _write(path, content, mode):
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8"))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def apply(changes):
    """Make each planned change true (content through a temporary file and a rename)."""
    for change in changes:
        try:
            if change["action"] == "remove":
                os.unlink(change["path"])
            elif change["action"] == "mode":
                os.chmod(change["path"], change["mode"])
            else:
                _write(change["path"], change["content"], change["mode"])
        except (IOError, OSError) as exc:
            raise BootError("%s: cannot %s it (%s)" % (change["path"], change["action"], exc))


def diff(changes):
    """Ansible's diff list: one before/after per changed file."""
    return [{"before": c["before"], "after": c["after"], "before_header": c["path"],
             "after_header": "%s (%s)" % (c["path"], c["action"])} for c in changes]
