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
import stat
import tempfile

# The largest file a reader takes whole: sysfs and procfs attributes are a page, the largest text
# a gate reads (a package database, an ibnetdiscover capture) is a few MiB. Past this it is not
# what we expect, and reading it would hold a module's memory hostage.
MAX_READ_BYTES = 64 * 1024 * 1024


def unwritable(path):
    """Why a file cannot be made at ``path`` as its folders stand (None when it can be tried): the
    nearest existing ancestor is not a folder. A caller that writes several files asks it of each
    before the first write (a file in a folder's place would stop the set half way); it only looks,
    so check mode asks it too and predicts the failure."""
    existing = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return "%s is not a folder" % existing
    return None


def _keep_owner_and_label(path, tmp, old):
    """The replacement keeps the replaced file's owner and SELinux label (what Ansible's atomic_move
    does): a rewritten /etc/default/grub stays root's and keeps its context on RHEL. Best effort: a
    file system without xattrs, or a user who may not chown, leaves the new file as created."""
    try:
        if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
            os.chown(tmp, old.st_uid, old.st_gid)
    except OSError:
        pass
    try:
        os.setxattr(tmp, "security.selinux", os.getxattr(path, "security.selinux"))
    except (OSError, AttributeError):
        pass


class WriteError(Exception):
    """A file could not be written (or what would be written is not valid): the message names the
    path and the cause. Nothing was changed: the target is as it was, no temporary file is left."""


def atomic_write(path, data, mode=None, validate=None):
    """The one way the collection writes a file: all or nothing.

    ``data`` is text (UTF-8) or bytes. ``validate(data)`` runs before anything touches the disk; a
    ValueError from it becomes a WriteError naming the path and nothing is written (a netplan or
    GRUB file that would not parse never reaches the node). The new content goes to a temporary
    file beside ``path`` (same file system, so the rename is atomic), is flushed to disk, gets
    ``mode`` (default: the replaced file's mode, else 0o644) and replaces ``path`` in one rename.
    On any failure the temporary file is removed and WriteError names the path and the cause.
    """
    if validate is not None:
        try:
            validate(data)
        except ValueError as exc:
            raise WriteError("%s: not written, the new content is not valid: %s" % (path, exc))
    if not isinstance(data, bytes):
        data = data.encode("utf-8")
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise WriteError("%s: cannot write, it is a folder" % path)
    if "\0" in path:
        raise WriteError("%r: cannot write, the path holds a NUL byte" % path)
    try:
        old = os.stat(path)
    except OSError:
        old = None
    if mode is None:
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o644
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".gpufleet-new",
                                   dir=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if old is not None:
            _keep_owner_and_label(path, tmp, old)
        os.replace(tmp, path)
        tmp = None
    except (IOError, OSError) as exc:
        raise WriteError("%s: cannot write (%s)" % (path, exc.strerror or exc))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


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
        """Bytes of ``rel`` or None. ``optional``: absence is normal, so it is no problem.

        A read never blocks and never takes more than MAX_READ_BYTES: the file is opened without
        waiting (a FIFO or a device where an attribute should be would hang a module forever) and
        anything but a regular file (sysfs and procfs attributes are regular files) is a problem
        naming the path, as is a symlink loop."""
        try:
            fd = os.open(self.join(rel), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except ValueError:  # a NUL byte in the path
            self.problem(rel, "invalid", "the path holds a NUL byte")
            return None
        except (IOError, OSError) as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                if not optional:
                    self.problem(rel, "missing", "file not found")
            elif exc.errno == errno.ELOOP:
                self.problem(rel, "unreadable", "symlink loop")
            elif exc.errno == errno.EISDIR:
                self.problem(rel, "invalid", "a folder where a file was expected")
            else:
                self.problem(rel, "unreadable", exc.strerror or str(exc))
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.problem(rel, "invalid", "not a regular file (%s)" % _kind(st.st_mode))
                return None
            chunks, size = [], 0
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_READ_BYTES:
                    self.problem(rel, "invalid", "larger than %d bytes" % MAX_READ_BYTES)
                    return None
                chunks.append(chunk)
            return b"".join(chunks)
        except (IOError, OSError) as exc:
            self.problem(rel, "unreadable", exc.strerror or str(exc))
            return None
        finally:
            os.close(fd)

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
        except ValueError:  # a NUL byte in the path
            self.problem(rel, "invalid", "the path holds a NUL byte")
            return None
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


def _kind(st_mode):
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(st_mode):
            return name
    return "mode %o" % st_mode


def _sample(text, width=40):
    return text if len(text) <= width else text[:width] + "..."
