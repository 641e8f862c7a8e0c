# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The JSON document a tool prints after some text (``dcgmi diag -j``: "Successfully ran diagnostic
for group." first; ``nvme smart-log -o json`` on some versions: a warning line first)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def json_after_text(text):
    """The JSON value that starts at the first ``{`` of ``text``; ValueError when there is none."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON document")
    try:
        return json.loads(text[start:])
    except ValueError as exc:
        raise ValueError("not JSON: %s" % exc)
