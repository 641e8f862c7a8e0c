# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation gate: every check is a pure function over facts, a profile and collected inputs.

``evaluate()`` runs all checks in one process and returns the report
``{status, node, profile, checks: [{id, status, observed, expected, reason, prevents, remedy}]}``.

Statuses: ``pass``; ``fail`` (the node is not what the profile says); ``skip`` (the profile does not
ask for it, or there is no data: "no data ..."; never a pass); ``error`` (the input exists but
could not be read or parsed: the reason names the path). A check listed in the profile's
``require`` turns a skip into a fail. The report fails when any check fails or errors.

Where things live (``_gate/``): ``framework`` (Check, Inputs, Skip/CheckError, outcome),
``cmdline`` (kernel command line and GRUB analysis), ``parsers/`` (command outputs: pure functions,
text in, data out), ``checks/<domain>`` (the checks, each domain its own list). A new check goes in
the domain module it belongs to; a new domain is added to DOMAINS below.

Check ids are a stable interface: dashboards and alerts key on them. docs/checks.md has one line
per id, and ids.py lists them for the profile lookup; keep both in step with CHECKS (this module
refuses to import when ids.py differs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.checks import (
    cpu, firmware, gpu, guest, memory, network, packages, probes, roce, storage, system)
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.cmdline import read_grub_sources
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, Inputs, NotAsked, Skip
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import ids as _ids

__all__ = ["CHECKS", "CHECK_IDS", "PROBES", "CheckError", "Inputs", "Skip", "evaluate", "read_grub_sources"]

# Report order: the domains in this order, each in its registration order.
DOMAINS = (system, memory, cpu, gpu, packages, network, roce, firmware, storage, guest, probes)
CHECKS = tuple(c for domain in DOMAINS for c in domain.CHECKS)
CHECK_IDS = tuple(c.id for c in CHECKS)
PROBES = dict((c.id, c.probe) for c in CHECKS if c.probe)
if len(set(CHECK_IDS)) != len(CHECK_IDS):
    raise ImportError("duplicate check id in %s" % ", ".join(CHECK_IDS))
if CHECK_IDS != _ids.CHECK_IDS:
    raise ImportError("_gate/ids.py is not the registered checks in report order: ids.py %s, checks %s"
                      % (", ".join(_ids.CHECK_IDS), ", ".join(CHECK_IDS)))


def _json_safe(value):
    if isinstance(value, dict):
        return dict((str(k), _json_safe(v)) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        items = sorted(value) if isinstance(value, set) else value
        return [_json_safe(v) for v in items]
    return value


def evaluate(inputs, node=None, profile_name=None, checks=None, require=()):
    """Run the checks over ``inputs`` (an Inputs with a normalised profile): every check, or the ids
    in ``checks`` (in the stable order). ``require`` adds ids whose skip is a failure to the
    profile's ``require``. Returns the report."""
    selected = set(checks) if checks else None
    unknown = sorted((selected or set()).union(require) - set(CHECK_IDS))
    if unknown:
        raise CheckError("unknown check id(s): %s (known: see docs/checks.md)" % ", ".join(unknown))
    required = set((inputs.profile or {}).get("require") or []).union(require)
    # An enabled probe requires its checks' data; a threshold it does not set stays a skip.
    probed = set(c for c, probe in PROBES.items() if _profile.section(inputs.profile, "probes", probe, "enabled"))
    results = []
    for chk in CHECKS:
        if selected is not None and chk.id not in selected:
            continue
        observed = expected = None
        not_asked = False
        try:
            status, observed, expected, reason = chk.func(inputs)
        except Skip as exc:
            status, reason, not_asked = "skip", str(exc), isinstance(exc, NotAsked)
        except CheckError as exc:
            status, reason = "error", str(exc)
        except Exception as exc:  # a bug in one check must not hide the others' results
            status, reason = "error", "internal error in check %s: %s: %s" % (chk.id, type(exc).__name__, exc)
        if status == "skip" and (chk.id in required or (chk.id in probed and not not_asked)):
            status, reason = "fail", "required by profile, but %s" % reason
        results.append({
            "id": chk.id,
            "status": status,
            "observed": _json_safe(observed),
            "expected": _json_safe(expected),
            "reason": reason,
            "prevents": chk.prevents,
            "remedy": chk.remedy,
        })
    red = [r["id"] for r in results if r["status"] in ("fail", "error")]
    return {
        "status": "fail" if red else "pass",
        "node": node,
        "profile": profile_name if profile_name is not None else (inputs.profile or {}).get("name"),
        "failed": red,
        "counts": dict((s, sum(1 for r in results if r["status"] == s)) for s in ("pass", "fail", "skip", "error")),
        "checks": results,
    }
