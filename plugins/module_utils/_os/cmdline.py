# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line rules: pure functions over parameter words (no I/O).

One set of rules (``rules()``) says what the command line must be; ``problems()`` says how a
command line (the running one, or the one the GRUB sources will give) differs from it, and
``owned_view()`` keeps only the parameters the rules own, so "GRUB will boot" and "running has"
can be compared without the parameters nobody asked for (``BOOT_IMAGE=``, ``root=``, ``quiet``).

Rules of the kernel (shared/DOMAIN.md section 3): ``hugepagesz=`` precedes the ``hugepages=`` it
sizes, each size once; ``default_hugepagesz=`` once; for other parameters the last occurrence
counts, so a duplicate is at best noise and at worst a silent override.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

HUGEPAGE_KEYS = ("default_hugepagesz", "hugepagesz", "hugepages")


class CmdlineError(ValueError):
    """The rules contradict themselves; the message names the parameters."""


def split(param):
    """``hugepages=128`` -> ("hugepages", "128"); ``quiet`` -> ("quiet", None)."""
    key, sep, value = param.partition("=")
    return key, (value if sep else None)


# What one parameter may hold to be written as one word inside GRUB_CMDLINE_LINUX="..." and read
# back as the same word: no blank or control character, no quote, $, backtick or backslash.
_WORD = re.compile(r"^[^\s\x00-\x1f\x7f\"'`$\\]{1,4096}\Z")


def check_word(option, word):
    """Raise CmdlineError naming ``option`` and ``word`` unless it is one parameter GRUB can carry."""
    if not isinstance(word, str) or not _WORD.match(word) or word.startswith("="):
        raise CmdlineError("%s: kernel command line parameter %r: one parameter (key or key=value), no blanks, "
                           "quotes, $, backticks, backslashes or control characters, at most 4096 characters"
                           % (option, word))


def rules(params, forbidden=(), allow_repeated=()):
    """The rules for ``params`` (ordered; the hugepage ones form the hugepage block, in kernel order).

    Returns {"params", "required" (non-hugepage params), "hugepage_block", "forbidden",
    "allow_repeated", "owned_keys"}: owned keys are those the role removes wherever they are except
    in ``params``: keys of the params (not repeatable ones) and forbidden bare keys. A forbidden
    ``key=value`` removes that exact parameter only (``pci=noats`` must not take ``pci=realloc``).
    """
    params = list(params or [])
    forbidden = list(forbidden or [])
    allow_repeated = list(allow_repeated or [])
    for option, words in (("required", params), ("forbidden", forbidden), ("allow_repeated", allow_repeated)):
        for word in words:
            check_word(option, word)
    for param in params:
        key = split(param)[0]
        if param in forbidden or key in forbidden:
            raise CmdlineError("kernel command line parameter %s is both required and forbidden" % param)
    block = [p for p in params if split(p)[0] in HUGEPAGE_KEYS]
    owned = []
    for param in params + [f for f in forbidden if "=" not in f]:
        key = split(param)[0]
        if key not in owned and key not in allow_repeated:
            owned.append(key)
    if block:
        # Every hugepage parameter belongs to the block: a stray hugepages= anywhere breaks the pools.
        owned += [k for k in ("hugepagesz", "hugepages") if k not in owned]
    return {
        "params": params,
        "required": [p for p in params if p not in block],
        "hugepage_block": block,
        "forbidden": forbidden,
        "allow_repeated": allow_repeated,
        "owned_keys": owned,
    }


def is_forbidden(word, rule):
    key = split(word)[0]
    return word in rule["forbidden"] or key in rule["forbidden"]


def is_owned(word, rule):
    """A word the rules decide about (owned key, forbidden, or an exact required parameter)."""
    return split(word)[0] in rule["owned_keys"] or is_forbidden(word, rule) or word in rule["params"]


def owned_view(words, rule):
    """The owned words of a command line, in order: what a reboot compares."""
    return [w for w in words if is_owned(w, rule)]


def problems(words, rule):
    """How ``words`` (a command line, in order) breaks ``rule``: [str], empty when it is right.

    Order matters only within the hugepage block; every other required parameter must be there
    exactly once (repeatable keys: that exact parameter once), nothing forbidden, no other key twice.
    """
    out = []
    keys = [split(w)[0] for w in words]
    for param in rule["required"]:
        key, value = split(param)
        if key in rule["allow_repeated"]:
            count = words.count(param)
            if count != 1:
                out.append("%s %s" % (param, "missing" if not count else "given %d times" % count))
            continue
        found = [w for w in words if split(w)[0] == key]
        if not found:
            out.append("%s missing" % param)
        elif found != [param]:
            out.append("%s expected, found %s" % (param, " ".join(found)))
    block = rule["hugepage_block"]
    if block:
        have_default = any(split(p)[0] == "default_hugepagesz" for p in block)
        seen = [w for w in words if split(w)[0] in HUGEPAGE_KEYS
                and (have_default or split(w)[0] != "default_hugepagesz")]
        if seen != block:
            out.append("hugepages: %s expected, found %s" % (" ".join(block), " ".join(seen) or "none"))
    for word in words:
        if is_forbidden(word, rule):
            out.append("%s forbidden but present" % word)
    for key in sorted(set(keys)):
        if key in rule["owned_keys"] or key in rule["allow_repeated"] or key in HUGEPAGE_KEYS:
            continue
        count = keys.count(key)
        if count > 1:
            out.append("%s given %d times" % (key, count))
    return out
