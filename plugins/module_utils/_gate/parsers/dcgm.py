# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCGM diagnostics (``dcgmi diag -r <level> -j``): pure parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.jsondoc import json_after_text


def _dicts(value, key):
    """The list of mappings under ``key`` ([] when absent); ValueError naming the key otherwise."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError("%r: expected a list of objects, got %s" % (key, str(value)[:80]))
    return value


def parse_dcgm_diag(text):
    """``dcgmi diag -r 1 -j`` -> {"version", "results": [{"category", "test", "gpus", "status", "info"}]}.

    The document (DCGM 3.x/4.x: ``DCGM GPU Diagnostic``, other versions name the top key otherwise)
    holds ``test_categories``, each with ``tests``, each with ``results`` per GPU (``gpu_id`` or
    ``gpu_ids``) and a status ``Pass``/``PASS``, ``Fail``, ``Warn``, ``Skip``/``SKIPPED``; warnings
    say why. Text before the JSON (``Successfully ran diagnostic for group.``) is skipped.
    ``runtime_error`` (the diagnostic could not run) raises ValueError with its text.
    """
    doc = json_after_text(text)
    top = None
    for value in (doc.values() if isinstance(doc, dict) else []):
        if isinstance(value, dict) and ("test_categories" in value or "runtime_error" in value):
            top = value
            break
    if top is None:
        raise ValueError("no 'test_categories' in the document")
    if top.get("runtime_error"):
        raise ValueError("dcgmi runtime error: %s" % top["runtime_error"])
    results = []
    for category in _dicts(top.get("test_categories"), "test_categories"):
        for test in _dicts(category.get("tests"), "tests"):
            for result in _dicts(test.get("results"), "results"):
                gpus = result.get("gpu_ids", result.get("gpu_id"))
                warnings = result.get("warnings") or []
                warnings = warnings if isinstance(warnings, list) else [warnings]
                text_of = [w.get("warning") if isinstance(w, dict) else str(w) for w in warnings]
                results.append({"category": category.get("category"), "test": test.get("name"),
                                "gpus": None if gpus is None else str(gpus), "status": str(result.get("status", "")).lower(),
                                "info": "; ".join(t for t in text_of if t)})
    if not results:
        raise ValueError("no test result in the document")
    return {"version": top.get("version"), "results": results}
