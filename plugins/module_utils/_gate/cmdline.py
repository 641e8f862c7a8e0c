# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line analysis: the rules over /proc/cmdline and over what the next update-grub
writes from the GRUB sources (read through a Root by ``read_grub_sources``; the rest is pure).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile


def param_text(key, value):
    return key if value is None else "%s=%s" % (key, value)


def analyse_cmdline(tokens, allow_repeated=()):
    """Kernel command line rules over ``tokens`` = [(key, value, origin)] in order.

    - ``hugepagesz=`` precedes the ``hugepages=`` it sizes; each size exactly once. A ``hugepages=``
      right after ``default_hugepagesz=`` sizes the default pool (kernel >= 5.7). Any other bare
      ``hugepages=`` makes the kernel warn "HugeTLB: hugepages= specified twice without
      interleaving hugepagesz=, ignoring" (or silently size the arch default): the planned pool is lost.
    - any other key at most once (``default_hugepagesz=`` included), except ``allow_repeated``.
    Returns (problems: [str], pools: {size_kb: count}).
    """
    problems = []
    pools = {}
    size_origin = {}
    pending = None
    last_count = None
    seen = {}
    for key, value, origin in tokens:
        where = "%s (%s)" % (param_text(key, value), origin)
        if key in ("hugepagesz", "default_hugepagesz"):
            if key == "default_hugepagesz":
                seen.setdefault(key, []).append(where)
            try:
                size = _profile.size_kb(value or "")
            except ValueError:
                problems.append("%s: not a hugepage size" % where)
                pending = None
                continue
            if key == "hugepagesz":
                if pending is not None and pending[2] == "hugepagesz":
                    problems.append("%s follows %s with no hugepages= between them" % (where, pending[1]))
                if size in size_origin:
                    problems.append("%s: size %s kB given twice (first %s)" % (where, size, size_origin[size]))
                else:
                    size_origin[size] = where
            pending = (size, where, key)
        elif key == "hugepages":
            if pending is None:
                if last_count is not None:
                    problems.append("%s follows %s with no hugepagesz= between them: the kernel ignores it "
                                    "(\"HugeTLB: hugepages= specified twice without interleaving hugepagesz=\")" % (where, last_count))
                else:
                    problems.append("%s has no hugepagesz= before it (it sizes whatever the default page size is)" % where)
                last_count = where
                continue
            last_count = where
            size = pending[0]
            pending = None
            try:
                count = int(value or "")
            except ValueError:
                problems.append("%s: not a page count" % where)
                continue
            if size in pools:
                problems.append("%s: pool %s kB already set" % (where, size))
            else:
                pools[size] = count
        else:
            seen.setdefault(key, []).append(where)
    if pending is not None and pending[2] == "hugepagesz":
        problems.append("%s is not followed by its hugepages=" % pending[1])
    for key, wheres in seen.items():
        if len(wheres) > 1 and key not in allow_repeated:
            problems.append("%s given %d times: %s" % (key, len(wheres), ", ".join(wheres)))
    return problems, pools


_ASSIGN = re.compile(r"^\s*(?:export\s+)?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=(.*)$")
_VAR = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")


def _shell_value(rhs):
    """The value of a sh assignment's right-hand side: ``"a $X" # c`` -> ``a $X``."""
    rhs = rhs.strip()
    if rhs[:1] in ("'", '"'):
        end = rhs.find(rhs[0], 1)
        if end < 0:
            raise ValueError("unterminated quote")
        return rhs[1:end]
    return rhs.split("#", 1)[0].split()[0] if rhs.split("#", 1)[0].split() else ""


def grub_tokens(sources):
    """GRUB sources in sourcing order [(rel path, text)] -> [(key, value, origin)] of the cmdline
    the next ``update-grub`` writes (GRUB_CMDLINE_LINUX then GRUB_CMDLINE_LINUX_DEFAULT).

    Cloud images append in /etc/default/grub.d/50-cloudimg-settings.cfg::

        GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT hugepages=16"

    so ``$VAR`` words keep the origin of the file that set them. Raises ValueError naming the file.
    """
    env = {"GRUB_CMDLINE_LINUX": [], "GRUB_CMDLINE_LINUX_DEFAULT": []}
    for rel, text in sources:
        for number, line in enumerate(text.splitlines(), 1):
            match = _ASSIGN.match(line)
            if not match:
                continue
            try:
                value = _shell_value(match.group(2))
            except ValueError as exc:
                raise ValueError("%s line %d: %s: %r" % (rel, number, exc, line))
            try:
                words = shlex.split(value)
            except ValueError:
                words = value.split()
            out = []
            for word in words:
                ref = _VAR.match(word)
                if ref:
                    out.extend(env.get(ref.group(1) or ref.group(2), []))
                else:
                    out.append((word, "%s:%d" % (rel, number)))
            env[match.group(1)] = out
    tokens = []
    for word, origin in env["GRUB_CMDLINE_LINUX"] + env["GRUB_CMDLINE_LINUX_DEFAULT"]:
        key, sep, value = word.partition("=")
        tokens.append((key, value if sep else None, origin))
    return tokens


def read_grub_sources(fs):
    """GRUB sources in the order update-grub sources them, through a Root ``fs``:
    {"sources": [(rel, text)], "problems": [...]} (etc/default/grub absent: no sources)."""
    start = len(fs.problems)
    sources = []
    text = fs.read("etc/default/grub", optional=True)
    if text is not None:
        sources.append(("etc/default/grub", text))
        for name in fs.listdir("etc/default/grub.d"):
            if name.endswith(".cfg"):
                rel = "etc/default/grub.d/" + name
                cfg = fs.read(rel)
                if cfg is not None:
                    sources.append((rel, cfg))
    return {"sources": sources, "problems": fs.problems[start:]}
