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
import tempfile

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import report as _report

CONTENT_TYPES = {"json": "application/json", "xml": "application/xml", "prom": "text/plain; version=0.0.4"}
_STAMP = re.compile(r"^gpufleet_validate_report_timestamp_seconds\{.*$", re.M)


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
    return _STAMP.sub("", text)


def plan(folder, node, files):
    """{path: text} of the files whose content differs from what is on disk (the timestamp aside).
    A file that cannot be read is rewritten; a folder that is not one raises OSError naming it."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise OSError("report_dir %s: exists and is not a folder" % folder)
    out = {}
    for ext, text in sorted(files.items()):
        path = os.path.join(folder, "%s.%s" % (node, ext))
        try:
            with open(path) as handle:
                same = _comparable(ext, handle.read()) == _comparable(ext, text)
        except (OSError, UnicodeDecodeError):
            same = False
        out[path] = None if same else text
    return out


def write(paths):
    """Write {path: text} atomically (a temporary file in the same folder, then rename), mode 0644;
    None entries are left alone. Returns {path: "written" | "unchanged"}."""
    status = {}
    for path, text in sorted(paths.items()):
        if text is None:
            status[path] = "unchanged"
            continue
        folder = os.path.dirname(path) or "."
        # every fork writes its node's files at once: the first creates the folder, the others find it
        os.makedirs(folder, 0o755, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=folder)
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.chmod(tmp, 0o644)
            os.rename(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        status[path] = "written"
    return status


def upload(base, node, files, open_url, **options):
    """PUT each file to <base>/<node>.<ext> with ``open_url`` (ansible.module_utils.urls). Returns
    {url: "uploaded"}; raises RuntimeError naming the URL and the HTTP status on the first failure."""
    status = {}
    headers = options.pop("headers", None) or {}
    for ext, text in sorted(files.items()):
        url = "%s/%s.%s" % (base.rstrip("/"), node, ext)
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
