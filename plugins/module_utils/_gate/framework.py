# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check framework: what a check is, what it reads, how it says pass, fail, skip or error.

A check is a function ``func(ctx) -> (status, observed, expected, reason)`` over an Inputs ``ctx``;
it raises Skip (not asked for by the profile, or no data: never a pass) or CheckError (the input
is there but unreadable or invalid: the message names the path). Each domain module under
``checks/`` keeps its own list and registers into it with ``registrar``; ``gate`` runs them all.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired


class Skip(Exception):
    """The check cannot say pass or fail: not asked for by the profile, or no data."""


class NotAsked(Skip):
    """The profile does not ask for this (a key unset): a skip that an enabled probe does not turn
    red (only the profile's ``require`` does)."""


class CheckError(Exception):
    """The input is there but unreadable or invalid; the message names the path."""


class Check:
    def __init__(self, check_id, prevents, remedy, func, probe=None):
        self.id = check_id
        self.prevents = prevents
        self.remedy = remedy
        self.func = func
        self.probe = probe


def registrar(checks):
    """A ``@check(check_id, prevents, remedy, probe=None)`` decorator appending to the list ``checks``
    (registration order is report order). ``probe``: the name under the profile's ``probes`` that
    enables this active probe; an enabled probe is required (its skip is a fail)."""
    def check(check_id, prevents, remedy, probe=None):
        def register(func):
            checks.append(Check(check_id, prevents, remedy, func, probe))
            return func
        return register
    return check


class Inputs:
    """Everything the checks read: facts (docs/facts.md), the normalised profile, and what the
    role collected with standard modules (package_facts, service_facts, command outputs)."""

    def __init__(self, facts, profile, packages=None, services=None, outputs=None, output_errors=None, grub=None, pci=None):
        """``packages`` may be a loader, ``loader() -> (packages, cause)``, called when a check first
        reads them (collect.py); ``services`` and ``outputs`` may be collect.py's lazy mappings.
        ``pci``: PCI devices by address, any vendor (collect.PciDevices: read on first use, the
        problems it met in its ``problems``), or None when not collected."""
        self.facts = facts or {}
        self.profile = profile
        self._packages = packages
        self.services = services
        self.outputs = outputs or {}
        # the same dict as the lazy outputs fill (an empty one would be replaced by "or {}")
        self.output_errors = output_errors if output_errors is not None else {}
        self.grub = grub
        self.pci = pci
        self.problems = self.facts.get("problems") or []
        self._parsed = {}

    @property
    def packages(self):
        """Installed packages (``package_facts`` form), or None when not collected (the cause in
        ``output_errors["packages"]``)."""
        if callable(self._packages):
            self._packages, cause = self._packages()
            if cause:
                self.output_errors["packages"] = cause
        return self._packages

    def not_collected(self, name):
        """"<name> not collected" with the cause when one is known."""
        # a lazy services mapping keeps the cause of a systemctl that could not be asked (collect.py)
        cause = self.output_errors.get(name) or (getattr(self.services, "cause", None) if name == "services" else None)
        return "%s not collected%s" % (name, " (%s)" % cause if cause else "")

    def want(self, *keys):
        """The profile value at keys, or Skip("not in profile (a.b)")."""
        value = _profile.section(self.profile, *keys)
        if value is None:
            raise NotAsked("not in profile (%s)" % ".".join(keys))
        return value

    def desired(self, area, keys):
        """The desired state of ``area`` from the profile, through the same function the roles apply
        (``_desired``): NotAsked("not in profile (keys)") when unset, CheckError when the profile
        contradicts itself."""
        try:
            value = _desired.derive(area, self.profile)
        except _desired.DesiredError as exc:
            raise CheckError("profile: %s" % exc)
        if value is None or value == {}:
            raise NotAsked("not in profile (%s)" % keys)
        return value

    def need(self, value, patterns, what=None):
        """``value`` unless it is None: then error for an unreadable/invalid input under one of the
        path ``patterns`` (fnmatch), else skip "no data" naming what is missing."""
        if value is not None:
            return value
        raise self.no_data(patterns, what)

    def no_data(self, patterns, what=None):
        problems = self.problems + list(getattr(self.pci, "problems", None) or [])
        found = [p for p in problems if any(fnmatch.fnmatchcase(p.get("path", ""), pat) for pat in patterns)]
        bad = [p for p in found if p.get("kind") in ("unreadable", "invalid")]
        if bad:
            return CheckError("; ".join("%s: %s (%s)" % (p["path"], p.get("detail"), p.get("kind")) for p in bad))
        if found:
            return Skip("no data: " + "; ".join("%s %s" % (p["path"], p.get("kind")) for p in found))
        return Skip("no data" + (": " + what if what else ""))

    def output(self, name, command):
        """Captured output ``name`` (str) or Skip("no data: <command> not collected (...)")."""
        text = self.outputs.get(name)
        if text is None:
            cause = self.output_errors.get(name)
            raise Skip("no data: %s output not collected%s" % (command, " (%s)" % cause if cause else ""))
        if not isinstance(text, str):
            raise CheckError("outputs.%s: expected the command's text output, got %s" % (name, type(text).__name__))
        return text

    def parsed(self, name, command, parser):
        """``parser(output(name))``, parsed once while the output stays the same (several checks
        read nvidia-smi -q); a ValueError from the parser is an error naming the output."""
        key = (name, parser)
        text = self.outputs.get(name)
        if key not in self._parsed or self._parsed[key][0] is not text:
            try:
                result = (parser(self.output(name, command)), None)
            except ValueError as exc:
                result = (None, CheckError("outputs.%s (%s): %s" % (name, command, exc)))
            except Skip as exc:
                result = (None, exc)
            self._parsed[key] = (text, result)
        value, exc = self._parsed[key][1]
        if exc is not None:
            raise exc
        return value


def outcome(failures, unknown, observed, expected, ok="ok"):
    if failures:
        return "fail", observed, expected, "; ".join(failures)
    if unknown:
        raise Skip("no data: " + "; ".join(unknown))
    return "pass", observed, expected, ok


def probe_settings(ctx, name):
    probe = _profile.section(ctx.profile, "probes", name) or {}
    if not probe.get("enabled"):
        raise NotAsked("not in profile (probes.%s.enabled: active probe off)" % name)
    return probe
