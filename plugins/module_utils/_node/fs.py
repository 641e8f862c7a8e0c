# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every read of host state goes through a Root (after prometheus/procfs ``FS.Path``).

The same code reads ``/`` on a live host, a captured tree in a test, and the rendered hardware view
of a lab twin. A file that is missing, unreadable or not what we expect never raises: the reader
returns ``None`` and records one problem naming the path relative to the root.

This module is private to the collection (leading underscore): no API promise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os


class Root:
    """A file system rooted at ``path``; all ``rel`` arguments are relative to it."""

    def __init__(self, path="/"):
        self.path = path or "/"
        self.problems = []
        self._seen = set()

    def join(self, *rel):
        return os.path.join(self.path, *[r.lstrip("/") for r in rel])

    def problem(self, rel, kind, detail):
        """Record one problem per path (kind: missing | unreadable | invalid)."""
        if rel in self._seen:
            return
        self._seen.add(rel)
        self.problems.append({"path": rel, "kind": kind, "detail": detail})

    def warnings(self):
        return ["%s: %s (%s)" % (p["path"], p["detail"], p["kind"]) for p in self.problems]

    def exists(self, rel):
        return os.path.lexists(self.join(rel))

    def isdir(self, rel):
        return os.path.isdir(self.join(rel))

    def read_bytes(self, rel, optional=False):
        """Bytes of ``rel`` or None. ``optional``: absence is normal, so it is no problem."""
        try:
            with open(self.join(rel), "rb") as handle:
                return handle.read()
        except (IOError, OSError) as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                if not optional:
                    self.problem(rel, "missing", "file not found")
            else:
                self.problem(rel, "unreadable", exc.strerror or str(exc))
            return None

    def read(self, rel, optional=False):
        """Text of ``rel`` stripped of surrounding whitespace, or None."""
        data = self.read_bytes(rel, optional=optional)
        if data is None:
            return None
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError:
            self.problem(rel, "invalid", "not UTF-8 text")
            return None

    def read_lines(self, rel, optional=False):
        text = self.read(rel, optional=optional)
        return None if text is None else text.splitlines()

    def parse(self, rel, parser, optional=False):
        """Read ``rel`` and apply ``parser(text)``; a ValueError from the parser is a problem."""
        text = self.read(rel, optional=optional)
        if text is None:
            return None
        try:
            return parser(text)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            self.problem(rel, "invalid", "cannot parse %r: %s" % (_sample(text), exc))
            return None

    def listdir(self, rel, optional=True):
        """Sorted entries of a folder; [] when absent (optional) or unreadable."""
        entries = self.entries(rel, optional=optional)
        return [] if entries is None else entries

    def entries(self, rel, optional=True):
        """Sorted entries of a folder; None when it is absent or cannot be read (a symlink loop,
        permissions): the caller can tell "nothing there" from "could not look". Unreadable is
        always a problem; absent only when not ``optional``."""
        try:
            return sorted(os.listdir(self.join(rel)))
        except (IOError, OSError) as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                if not optional:
                    self.problem(rel, "missing", "folder not found")
            else:
                self.problem(rel, "unreadable", exc.strerror or str(exc))
            return None

    def readlink(self, rel):
        try:
            return os.readlink(self.join(rel))
        except (IOError, OSError):
            return None

    def resolve(self, rel):
        """Follow symlinks of ``rel`` *inside* the root; return the resolved path relative to it.

        Absolute link targets are taken relative to the root (a captured tree keeps them as on the
        host). None when a link is broken or loops.
        """
        parts = [p for p in rel.strip("/").split("/") if p]
        resolved = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = "/".join(resolved + [part])
            target = self.readlink(candidate)
            if target is None:
                if not os.path.lexists(self.join(candidate)):
                    return None
                resolved.append(part)
                continue
            hops += 1
            if hops > 40:
                return None
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p] + parts
        return "/".join(resolved)

    def statvfs(self, rel):
        try:
            st = os.statvfs(self.join(rel))
        except (IOError, OSError):
            return None
        return {"size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def _sample(text, width=40):
    return text if len(text) <= width else text[:width] + "..."
