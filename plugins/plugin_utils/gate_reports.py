# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gate's report files on the controller (the validate_node action plugin): rendered from the
node's report, written into a folder only when their content changed, or PUT to a URL.

A second run with the same report writes nothing: the Prometheus timestamp and the JSON's facts
(free space, counters) are left out of the comparison, so the files then say since when the
verdicts hold and which facts they were first found on."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import options as _options
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import report as _report
from ansible_collections.gpufleet.provision.plugins.module_utils._node import fs as _fs

CONTENT_TYPES = {"json": "application/json", "xml": "application/xml", "prom": "text/plain; version=0.0.4"}
_STAMP = re.compile(r"^gpufleet_validate_report_timestamp_seconds\{.*$", re.M)
_LAST_RUN = re.compile(r"^gpufleet_validate_last_run_timestamp_seconds\{.*$", re.M)


class Refresh(str):
    """A ``.prom`` text whose verdicts are those on disk: rewritten only to move its last-run time
    (a monitoring system alerts on a gate that stopped running), which is not a change of the report.
    It keeps the report timestamp of the file it replaces: the time the verdicts last changed."""


def render(report, facts, timestamp):
    """{extension: text} of the three report files."""
    return {
        "json": json.dumps({"report": report, "facts": facts}, indent=4, sort_keys=True) + "\n",
        "xml": _report.junit(report),
        "prom": _report.prometheus(report, timestamp),
    }


def _comparable(ext, text):
    """What must differ for a file to be rewritten: the JSON's report (its facts are those of the run
    that wrote it: free space and counters move on every run), the other files but the timestamp."""
    if ext == "json":
        try:
            return json.dumps(json.loads(text).get("report"), sort_keys=True)
        except (ValueError, AttributeError):
            return None
    return _LAST_RUN.sub("", _STAMP.sub("", text))


def _node_name(node):
    """The node's name as the report files' name; ValueError when it is not one: the name comes from
    the node's own report, and ``../x`` or ``a/b`` must not write outside the folder (or the URL)."""
    problem = _options.node_name_problem(node)   # the rule validate_node checks its node option by
    if problem:
        raise ValueError("node name cannot name a report file: %s" % problem)
    return node


def plan(folder, node, files):
    """{path: text} of the files whose content differs from what is on disk (the timestamps aside);
    a ``.prom`` file whose verdicts are unchanged comes back as a Refresh (its last-run time moves).
    A file that cannot be read is rewritten; a folder that is not one, a report path that is not a
    regular file (read without blocking: a FIFO there) or a node name that is no file name raises
    OSError naming it."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise OSError("report_dir %s: exists and is not a folder" % folder)
    try:
        node = _node_name(node)
    except ValueError as exc:
        raise OSError("report_dir %s: %s" % (folder, exc))
    out = {}
    root = _fs.Root(folder)
    for ext, text in sorted(files.items()):
        name = "%s.%s" % (node, ext)
        path = os.path.join(folder, name)
        if os.path.lexists(path) and not os.path.isfile(path):
            raise OSError("%s: exists and is not a regular file" % path)
        data = root.read_bytes(name, optional=True)
        try:
            same = data is not None and _comparable(ext, data.decode("utf-8")) == _comparable(ext, text)
        except UnicodeDecodeError:
            same = False
        if same and ext == "prom":
            # the verdicts on disk hold: carry their report timestamp, move the last run
            old = _STAMP.search(data.decode("utf-8"))
            out[path] = Refresh(_STAMP.sub(lambda m: old.group(0), text) if old else text)
        else:
            out[path] = None if same else text
    return out


def write(paths):
    """Write {path: text} atomically (fs.atomic_write: a temporary file beside it, then rename, nothing
    left on failure), mode 0644; None entries are left alone. Returns {path: "written" | "refreshed" |
    "unchanged"} ("refreshed": a Refresh, only the last-run time moved: no change of the report).
    Raises OSError naming the path and the cause (the action plugin turns it into its failure)."""
    status = {}
    for path, text in sorted(paths.items()):
        if text is None:
            status[path] = "unchanged"
            continue
        folder = os.path.dirname(path) or "."
        try:
            # every fork writes its node's files at once: the first creates the folder, the others find it
            os.makedirs(folder, 0o755, exist_ok=True)
        except OSError as exc:
            raise OSError("%s: cannot make its folder %s (%s)" % (path, folder, exc.strerror or exc))
        try:
            _fs.atomic_write(path, text, mode=0o644)
        except _fs.WriteError as exc:
            raise OSError(str(exc))
        status[path] = "refreshed" if isinstance(text, Refresh) else "written"
    return status


def upload(base, node, files, open_url, **options):
    """PUT each file to <base>/<node>.<ext> with ``open_url`` (ansible.module_utils.urls). Returns
    {url: "uploaded"}; raises RuntimeError naming the URL and the HTTP status on the first failure."""
    status = {}
    headers = options.pop("headers", None) or {}
    for ext, text in sorted(files.items()):
        try:
            url = "%s/%s.%s" % (base.rstrip("/"), _node_name(node), ext)
        except ValueError as exc:
            raise RuntimeError("report_url %s: %s" % (base, exc))
        try:
            response = open_url(url, data=text.encode("utf-8"), method="PUT",
                                headers=dict({"Content-Type": CONTENT_TYPES[ext]}, **headers), **options)
            code = response.getcode()
        except Exception as exc:  # HTTPError, URLError, SSLError, socket errors: all name the URL
            code = getattr(exc, "code", None)
            raise RuntimeError("PUT %s failed: %s%s" % (url, "HTTP %s " % code if code else "", exc))
        if code not in (200, 201, 204):
            raise RuntimeError("PUT %s failed: HTTP %s" % (url, code))
        status[url] = "uploaded"
    return status
