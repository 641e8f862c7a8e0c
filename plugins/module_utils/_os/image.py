# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The manifest of a golden image (``/etc/gpufleet/image.json``): pure functions of plain data.

``build`` makes it at the end of an image build (playbooks/image.yml) from the image's desired
state (``_desired`` area ``image``), its package database and holds, and the entry GRUB boots;
``differences`` tells, on a node booted from an image, whether the image still is what its profile
asks and whether the packages it pinned are still there and held (then provision.yml does no
package work). The gate reads the manifest through the root path (facts key ``image``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.gpufleet.provision.plugins.module_utils._os import grub as _grub

MANIFEST = "etc/gpufleet/image.json"
SCHEMA = 1
# Keys left out of the content hash: when it was made, and the hash itself.
UNHASHED = ("built", "content_hash")


class ImageError(Exception):
    """The manifest cannot be made or read; the message names the file and the cause."""


def content_hash(manifest):
    """``sha256:<hex>`` over the manifest's canonical JSON without ``built`` and ``content_hash``."""
    body = dict((k, v) for k, v in manifest.items() if k not in UNHASHED)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def versions(packages):
    """``package_facts`` form ({name: [{version, ...}]}) -> {name: version} (the first entry)."""
    return dict((name, entries[0].get("version")) for name, entries in sorted((packages or {}).items()) if entries)


def build(desired, packages, holds, grub_cfg, built=None, cfg_name="boot/grub/grub.cfg"):
    """The manifest: ``desired`` is ``_desired.derive("image", profile)``, ``packages`` the package
    database in ``package_facts`` form, ``holds`` the held names, ``grub_cfg`` the text of the
    generated GRUB configuration (its default entry gives the kernel and command line the image boots),
    ``cfg_name`` its path for messages."""
    entry = _grub.default_entry(grub_cfg or "")
    if entry is None:
        raise ImageError("%s has no default entry: run the kernel and kernel_cmdline roles first" % cfg_name)
    installed = versions(packages)
    held = sorted(set(holds or ()))
    missing = [name for name in held if name not in installed]
    if missing:
        raise ImageError("held but not installed: %s" % ", ".join(missing))
    manifest = {
        "schema": SCHEMA,
        "profile": desired["profile"],
        "desired_hash": desired["hash"],
        "desired": desired["desired"],
        "kernel": entry["release"],
        "cmdline": entry["args"],
        "holds": held,
        "pins": dict((name, installed[name]) for name in held),
        "packages": installed,
        "built": built,
    }
    manifest["content_hash"] = content_hash(manifest)
    return manifest


def same_content(old, new):
    """True when two manifests hold the same content (``built`` aside): rewriting would change nothing."""
    return bool(old) and old.get("content_hash") == new.get("content_hash") and content_hash(old) == old.get("content_hash")


# The keys a manifest holds and their JSON types: a manifest edited by hand, or another file in its
# place, is named as such instead of being compared key by key.
_SHAPE = (("schema", int), ("profile", str), ("desired_hash", str), ("content_hash", str), ("desired", dict),
          ("kernel", str), ("cmdline", list), ("holds", list), ("pins", dict), ("packages", dict),
          ("built", str), ("rewashed", str))


def shape_problems(manifest):
    """Why ``manifest`` (parsed JSON) is not a manifest ``build`` makes: [] when every key it has is
    of its type and the pins map names to versions."""
    if not isinstance(manifest, dict):
        return ["a JSON %s, not an object" % _json_type(manifest)]
    problems = ["%s is a JSON %s" % (key, _json_type(manifest[key])) for key, kind in _SHAPE
                if manifest.get(key) is not None and (not isinstance(manifest[key], kind) or isinstance(manifest[key], bool))]
    pins = manifest.get("pins")
    if isinstance(pins, dict) and not all(isinstance(v, str) for v in pins.values()):
        problems.append("pins holds a version that is not a string")
    return problems


def _json_type(value):
    for kind, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def differences(manifest, desired, packages=None, holds=None, verify=True):
    """Why a node booted from the image ``manifest`` is not (any more) what its profile asks: []
    when the image was built from the same desired state and every package it pinned is installed at
    that version and held. ``packages`` (``package_facts`` form) and ``holds`` are the node's now;
    None: not compared. ``verify``: the content hash must match the content (False for the facts
    key ``image``, which leaves the package list out)."""
    if manifest is None or manifest == {}:
        return ["no image manifest (/%s): not booted from a golden image" % MANIFEST]
    problems = shape_problems(manifest)
    if problems:
        return ["/%s: not an image manifest (%s)" % (MANIFEST, "; ".join(problems))]
    reasons = []
    if verify and manifest.get("content_hash") != content_hash(manifest):
        reasons.append("/%s: content hash %s does not match its content (edited after the build)" % (
            MANIFEST, manifest.get("content_hash")))
    if manifest.get("profile") != desired["profile"]:
        reasons.append("image built from profile %s, the node's profile is %s" % (manifest.get("profile"), desired["profile"]))
    elif manifest.get("desired_hash") != desired["hash"]:
        changed = sorted(k for k in set(desired["desired"]) | set(manifest.get("desired") or {})
                         if (manifest.get("desired") or {}).get(k) != desired["desired"].get(k))
        reasons.append("image built from an older state of profile %s (%s; changed since: %s)" % (
            desired["profile"], short(manifest.get("desired_hash")), ", ".join(changed) or "unknown"))
    now = versions(packages) if packages is not None else None
    held = set(holds) if holds is not None else None
    for name, version in sorted((manifest.get("pins") or {}).items()):
        if now is not None and now.get(name) != version:
            reasons.append("%s: %s in the image, %s installed" % (name, version, now.get(name) or "not"))
        elif held is not None and name not in held:
            reasons.append("%s: held in the image, not held now" % name)
    return reasons


def short(digest):
    """``sha256:0123456789ab`` (12 hex digits) of a hash, for messages."""
    return (digest or "none")[:19]
