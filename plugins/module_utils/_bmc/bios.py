# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""BIOS settings through Redfish: pure diff/pending logic, validation, and the flow over a client.

The trap this avoids (community.general bug reports): comparing desired values with the current
attributes only re-PATCHes on every run while a change waits for the reboot. Every desired
attribute is classified against current AND pending:

    current == desired, pending absent or equal   -> "current"  (nothing to do)
    current != desired, pending == desired        -> "pending"  (no write, reboot required)
    anything else (incl. a pending value that
    would undo a correct current one)             -> "write"

Where the pieces are: the registry (finding it is Bios.load_registry; reading it, locks from its
Dependencies, ValueDisplayNames) in bios_registry; portable settings resolved on it in
bios_resolve; vendor rules (Dell jobs) here. Every name and value is checked against the BMC's
registry before anything is written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import math

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import (
    RedfishError, describe, expect, link, member_paths, members)

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_registry as registry_lib
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_resolve as resolve_lib
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_values as _bios_values

# Re-exported for the module's argument spec and other callers.
HINTS = resolve_lib.HINTS
PORTABLE_SETTINGS = _bios_values.PORTABLE_SETTINGS
POWER_PROFILES = _bios_values.POWER_PROFILES
SNC_VALUES = _bios_values.SNC_VALUES

# Vendor rules, for vendors known from the Manufacturer (or the registry's OwningEntity). Names
# and values are in bios_resolve.HINTS; a BMC of any other vendor is driven by its registry alone.
PROFILES = {
    "dell": {"match": ("dell",), "config_job": True,
             # iDRAC keeps these read-only unless SysProfile is Custom. The registry's Dependencies
             # say so too and win when present; this table serves a BMC without a registry.
             "requires": dict((name, ("SysProfile", "Custom")) for name in (
                 "ProcCStates", "ProcC1E", "ProcTurboMode", "ProcPwrPerf", "EnergyPerformanceBias", "UncoreFrequency"))},
    "lenovo": {"match": ("lenovo",), "config_job": False, "requires": {}},
    "hpe": {"match": ("hpe", "hewlett packard", "hp"), "config_job": False, "requires": {}},
    "supermicro": {"match": ("supermicro",), "config_job": False, "requires": {}},
    "ami": {"match": ("ami", "american megatrends", "nvidia"), "config_job": False, "requires": {}},
}
VENDORS = tuple(sorted(PROFILES))
GENERIC = "generic"
# How the registry was found (the result's registry_source.found_by).
FOUND_BY_NAME = "Bios.AttributeRegistry"
FOUND_BY_SCAN = "Registries scan"


class BiosError(RedfishError):
    """Bad input or a refused plan; same type family as transport errors so main() has one except."""


def detect_vendor(manufacturer):
    """Vendor profile name from ComputerSystem.Manufacturer ("Dell Inc." -> "dell"), or None."""
    words = (manufacturer or "").lower().replace(",", " ").replace(".", " ")
    tokens = words.split()
    for vendor in VENDORS:
        for needle in PROFILES[vendor]["match"]:
            if (" " in needle and needle in words) or needle in tokens:
                return vendor
    return None


def resolve_settings(settings, registry, vendor=None, current=None):
    """Portable settings -> ({raw attribute: value}, [resolution], [unresolved resolution]).

    Every setting is resolved against the registry (see bios_resolve); two settings on one
    attribute (Dell's ProcVirtualization is VT-x and VT-d) must agree.
    """
    unknown = sorted(set(settings or {}) - set(PORTABLE_SETTINGS))
    if unknown:
        raise BiosError("unknown portable settings %s (known: %s)" % (", ".join(unknown), ", ".join(PORTABLE_SETTINGS)))
    out, origin, resolutions, unresolved = {}, {}, [], []
    for key in PORTABLE_SETTINGS:
        if key not in (settings or {}) or settings[key] is None:
            continue
        if registry:
            res = resolve_lib.resolve(key, settings[key], registry, vendor)
        else:
            res = resolve_lib.resolve_without_registry(key, settings[key], current or {}, vendor)
        resolutions.append(res)
        if res["problem"]:
            unresolved.append(res)
            continue
        name, raw = res["attribute"], res["value"]
        if name in out and out[name] != raw:
            raise BiosError("settings %s and %s both resolve to attribute %s on this BMC but want %r and %r" % (
                origin[name], key, name, out[name], raw))
        out[name] = raw
        origin[name] = key
    return out, resolutions, unresolved


def format_unresolved(bmc, unresolved):
    return "BMC %s: nothing written: %s" % (bmc, "; ".join(
        "%s=%s %s%s" % (r["setting"], r["wanted"], r["problem"],
                        (" [candidates: %s]" % ", ".join(r["candidates"])) if r["candidates"] and
                        not all(c in r["problem"] for c in r["candidates"]) else "")
        for r in unresolved))


def check_input(attributes, settings):
    """The task's raw attributes, checked before anything is sent: names non-empty strings, values a
    string, a finite number or a boolean (where no registry checks values, a list, an object or null
    would be PATCHed as given), and something to do at all."""
    problems = []
    for name in sorted(attributes or {}, key=str):
        value = attributes[name]
        if not isinstance(name, str) or not name.strip():
            problems.append("attribute name %r is empty" % (name,))
        elif value is None or not isinstance(value, (str, int, float, bool)) or (
                isinstance(value, float) and not math.isfinite(value)):
            problems.append("attributes.%s is %s; expected a string, a number or a boolean" % (name, describe(value)))
    if problems:
        raise BiosError("nothing sent: %s" % "; ".join(problems))
    if not attributes and not any(value is not None for value in (settings or {}).values()):
        raise BiosError("nothing to do: give attributes and/or settings; nothing sent")


def merge_desired(attributes, translated):
    """Raw attributes win over nothing: the same name from both with different values is an error."""
    out = dict(translated)
    for name, value in (attributes or {}).items():
        if name in out and out[name] != value:
            raise BiosError("attribute %s=%r conflicts with %r from settings" % (name, value, out[name]))
        out[name] = value
    return out


parse_registry = registry_lib.parse_registry


def coerce(desired, registry):
    """Match input to the registry: Integer "3" -> 3, Boolean "true" -> True, a ValueDisplayName
    ("2-Way Clustering") -> its ValueName ("2-Way")."""
    out = {}
    for name, value in desired.items():
        spec = registry.get(name) or {}
        kind = spec.get("type")
        if kind == "Integer" and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        elif kind == "Boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        elif kind == "Enumeration":
            value = registry_lib.to_value_name(spec, value)
        out[name] = value
    return out


def registry_label(source):
    """How an error names the registry it checked against: "registry X (uri, found by ...)"."""
    if not source or not source.get("uri"):
        return None
    return "registry %s (%s, found by %s)" % (source.get("id"), source["uri"], source.get("found_by"))


def _out_of_bounds(spec, value):
    """Why an integer is outside the registry's LowerBound/UpperBound, else None."""
    if isinstance(spec.get("lower"), int) and value < spec["lower"]:
        return "below the registry's LowerBound %d" % spec["lower"]
    if isinstance(spec.get("upper"), int) and value > spec["upper"]:
        return "above the registry's UpperBound %d" % spec["upper"]
    return None


def validate(bmc, desired, registry, current, dependencies=None, pending=None, label=None):
    """Every name known, every value allowed, nothing locked, or one error listing all problems
    (and, with ``label``, the registry they were checked against).

    Locks are the registry's ReadOnly Dependencies evaluated on what the BIOS will have after the
    reset (desired over pending over current). No registry: names must at least exist among the
    current attributes (a Bios resource lists all of them)."""
    problems = []
    known = registry if registry else current
    after = dict(current or {})
    after.update(pending or {})
    after.update(desired)
    for name in sorted(desired):
        value = desired[name]
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3)
            problems.append("attribute %s is not in the %s (%s%d known)" % (
                name, "BIOS attribute registry" if registry else "current BIOS attributes",
                ("closest: %s; " % ", ".join(close)) if close else "", len(known)))
            continue
        if not registry:
            continue
        spec = registry[name]
        locked, dep = registry_lib.lock_state(name, spec, dependencies or [], after)
        if locked:
            problems.append("attribute %s is read-only%s" % (
                name, (" while %s" % registry_lib.describe(dep["terms"])) if dep else " in the registry"))
        elif spec["values"] is not None and value not in spec["values"]:
            problems.append("attribute %s: value %r not allowed (allowed: %s)" % (name, value, ", ".join(map(str, spec["values"]))))
        elif spec["type"] == "Integer" and (isinstance(value, bool) or not isinstance(value, int)):
            problems.append("attribute %s: value %r is not an integer" % (name, value))
        elif spec["type"] == "Integer" and _out_of_bounds(spec, value):
            problems.append("attribute %s: value %r %s" % (name, value, _out_of_bounds(spec, value)))
        elif spec["type"] == "Boolean" and not isinstance(value, bool):
            problems.append("attribute %s: value %r is not a boolean" % (name, value))
    if problems:
        raise BiosError("BMC %s: nothing written: %s%s" % (bmc, "; ".join(problems), (" [checked against %s]" % label) if label else ""))


def add_dependencies(vendor, desired, registry=None, dependencies=None, current=None, pending=None):
    """Prepend the controlling attributes that unlock desired ones (Dell SysProfile=Custom).

    From the registry's ReadOnly Dependencies when it has any (a single "X is not V" lock is
    released by X=V), else from the vendor table. Returns (ordered desired, {controller: reason}),
    controllers first so one PATCH works."""
    deps, reasons = {}, {}
    after = dict(current or {})
    after.update(pending or {})
    after.update(desired)
    if registry and dependencies:
        for name in desired:
            if name not in registry:
                continue
            locked, dep = registry_lib.lock_state(name, registry[name], dependencies, after)
            if not locked or dep is None:
                continue
            release = registry_lib.unlock(dep, registry)
            if not release:
                continue
            (ctrl, needed), = release.items()
            if ctrl in desired and desired[ctrl] != needed:
                raise BiosError("attribute %s needs %s=%s (registry dependency), but %s=%s is requested" % (
                    name, ctrl, needed, ctrl, desired[ctrl]))
            deps[ctrl] = needed
            reasons[ctrl] = "unlocks %s (registry: read-only while %s)" % (name, registry_lib.describe(dep["terms"]))
    else:
        requires = PROFILES[vendor]["requires"] if vendor in PROFILES else {}
        for name in desired:
            if name not in requires:
                continue
            ctrl, needed = requires[name]
            if ctrl in desired:
                if desired[ctrl] != needed:
                    raise BiosError("attribute %s needs %s=%s on %s, but %s=%s is requested" % (
                        name, ctrl, needed, vendor, ctrl, desired[ctrl]))
                continue
            # Always part of the plan: classify() finds it current or pending (no write) when already so,
            # and verify then checks it too.
            deps[ctrl] = needed
            reasons[ctrl] = "required by %s" % name
    ordered = dict((k, v) for k, v in deps.items() if k not in desired)
    ordered.update(desired)
    return ordered, reasons


def classify(desired, current, pending):
    """Pure core: {name: "current"|"pending"|"write"} for every desired attribute (see module doc)."""
    out = {}
    for name, want in desired.items():
        now = current.get(name, _MISSING)
        if name in pending:
            if pending[name] == want:
                out[name] = "current" if now == want else "pending"
            else:
                out[name] = "write"
        else:
            out[name] = "current" if now == want else "write"
    return out


_MISSING = object()


def plan(desired, current, pending):
    """Summary of classify(): what to PATCH, what waits for the reboot, the diff to show."""
    status = classify(desired, current, pending)
    to_write = dict((n, desired[n]) for n in desired if status[n] == "write")
    waiting = [n for n in desired if status[n] == "pending"]
    return {
        "status": status,
        "to_write": to_write,
        "already_pending": waiting,
        "reboot_required": bool(to_write or waiting),
        # What this run changes: before is what the next reset would have applied without us.
        "diff": {"before": dict((n, pending.get(n, current.get(n))) for n in to_write),
                 "after": dict(to_write)},
    }


def verify(desired, current, pending):
    """After the reboot: list of {"attribute", "expected", "actual", "pending"} that are not current."""
    failures = []
    for name, want in desired.items():
        actual = current.get(name)
        if actual != want:
            failures.append({"attribute": name, "expected": want, "actual": actual, "pending": pending.get(name)})
    return failures


def format_failures(bmc, failures, job_problem=None):
    parts = []
    for f in failures:
        text = "%s: expected %r, actual %r" % (f["attribute"], f["expected"], f["actual"])
        if f["pending"] is not None:
            text += " (still pending: %r)" % (f["pending"],)
        parts.append(text)
    msg = "BMC %s: BIOS not as desired after reboot: %s" % (bmc, "; ".join(parts))
    if job_problem:
        msg += ". " + job_problem
    return msg


STUCK_MARKERS = ("initialization failure",)


def job_problem(job):
    """Dell: a job still Scheduled with "Job processing initialization failure." never runs."""
    if not job:
        return None
    message = str(job.get("Message") or "")
    if job.get("JobState") in ("Failed", "CompletedWithErrors") or (
            job.get("JobState") == "Scheduled" and any(m in message.lower() for m in STUCK_MARKERS)):
        return ("Dell BIOS configuration job %s is %s with %r: it will not apply the pending values; "
                "delete the job and the pending BIOS configuration (or reset iDRAC), then run again" % (
                    job.get("Id"), job.get("JobState"), message))
    return None


def pending_changes(current, settings_object):
    """What a reset would change: the settings object's attributes that differ from current.

    Dell's Bios/Settings holds only the pending attributes; Lenovo's Bios/Pending, HPE's
    bios/settings and AMI's Bios/SD hold every attribute, most equal to the current value."""
    return dict((k, v) for k, v in (settings_object or {}).items() if current.get(k, _MISSING) != v)


def _has_bios(system):
    return bool(link(system, "Bios"))


class Bios:
    """The I/O flow over a RedfishClient: discover, read, validate, plan, write. No Ansible here."""

    def __init__(self, client, system_id=None, vendor="auto"):
        self.client = client
        self.system_path, self.system = client.find_system(system_id, usable=_has_bios, purpose="a Bios link")
        self.manufacturer = expect(client.name, self.system_path, self.system, ("Manufacturer",), str)
        if vendor not in (None, "", "auto", GENERIC) and vendor not in PROFILES:
            raise BiosError("vendor %r unknown (known: auto, %s, %s)" % (vendor, GENERIC, ", ".join(VENDORS)))
        self.vendor_option = vendor or "auto"
        self.vendor = vendor if vendor in PROFILES else None
        if self.vendor_option == "auto":
            self.vendor = detect_vendor(self.manufacturer)
        self.bios_path = link(self.system, "Bios")
        if not self.bios_path:
            raise BiosError("BMC %s: system %s has no Bios link" % (client.name, self.system_path))
        self.bios = client.get(self.bios_path)
        settings = expect(client.name, self.bios_path, self.bios, ("@Redfish.Settings",), dict, {})
        self.settings_path = link(settings, "SettingsObject")
        if not self.settings_path:
            raise BiosError("BMC %s: %s has no @Redfish.Settings.SettingsObject, so pending values cannot be told "
                            "from current ones; refusing to write" % (client.name, self.bios_path))
        self.apply_times = expect(client.name, self.bios_path, settings, ("SupportedApplyTimes",), list, [])
        self.registry = {}
        self.dependencies = []
        self.registry_uri = None
        self.registry_note = None
        self.registry_source = None
        self.raw_current = expect(client.name, self.bios_path, self.bios, ("Attributes",), dict, {})
        self.current = dict(self.raw_current)
        self.read_settings_object()

    def read_settings_object(self):
        body, self.etag = self.client.get_with_etag(self.settings_path)
        self.settings_object = expect(self.client.name, self.settings_path, body, ("Attributes",), dict, {})
        self.pending = pending_changes(self.current, registry_lib.normalize_values(self.settings_object, self.registry))
        return self.pending

    @property
    def vendor_name(self):
        return self.vendor or GENERIC

    # -- registry ---------------------------------------------------------------------------------
    def load_registry(self):
        """Find the BIOS attribute registry: the one the Bios resource names (the way the standard
        says, then the vendor places seen in the wild), else, when it names none, the one attribute
        registry /redfish/v1/Registries offers that matches the Bios's attributes. Sets registry,
        dependencies, registry_uri, registry_source and, when none is found, registry_note."""
        wanted = expect(self.client.name, self.bios_path, self.bios, ("AttributeRegistry",), str)
        if wanted:
            document, uri, tried = self._find_registry(wanted)
            found_by, how = FOUND_BY_NAME, "the Bios names %s" % wanted
            if document is None:
                self.registry_note = "registry %s not found (tried %s)" % (wanted, ", ".join(tried) or "nothing")
        else:
            document, uri, how = self._scan_registries()
            found_by = FOUND_BY_SCAN
            if document is None:
                self.registry_note = "the Bios resource names no AttributeRegistry and %s" % how
        if document is None:
            self.registry_source = {"id": None, "uri": None, "found_by": None, "how": self.registry_note}
            return {}
        problem = registry_lib.shape_problem(document)
        if problem:
            raise BiosError("BMC %s: the attribute registry at %s is malformed: %s; nothing written" % (
                self.client.name, uri, problem))
        self.registry_uri = uri
        self.registry_source = {"id": document.get("Id") or wanted, "uri": uri, "found_by": found_by, "how": how}
        self.registry = registry_lib.parse_registry(document)
        self.dependencies = registry_lib.parse_dependencies(document)
        if self.vendor is None and self.vendor_option == "auto":
            self.vendor = detect_vendor(document.get("OwningEntity"))
        # Some BMCs report ValueDisplayNames in Attributes: compare ValueNames throughout.
        self.current = registry_lib.normalize_values(self.raw_current, self.registry)
        self.pending = pending_changes(self.current, registry_lib.normalize_values(self.settings_object, self.registry))
        return self.registry

    def _fetch(self, uri, kind="Uri"):
        try:
            if kind == "PublicationUri":
                return self.client.get_public(uri)
            return self.client.get(uri)
        except RedfishError as exc:
            # Not there (4xx) is an answer; a BMC that stops answering is an error. A public
            # PublicationUri is a courtesy: air-gapped sites never reach it.
            if kind == "PublicationUri" or exc.status in (400, 404, 405, 406, 410):
                return None
            raise

    def _registry_document(self, wanted, entry, tried):
        for kind, uri in registry_lib.locations(entry):
            tried.append(uri)
            doc = self._fetch(uri, kind)
            if registry_lib.has_entries(doc):
                return doc, uri
        return None, None

    def _registry_members(self):
        """(collection path, paths of its MessageRegistryFile members): the service root's Registries."""
        coll = link(self.client.get("/redfish/v1"), "Registries")
        if not coll:
            return None, []
        return coll, member_paths(self.client.name, coll, self.client.get(coll))

    def _find_registry(self, wanted):
        tried = []
        _coll, members = self._registry_members()
        # The member's path usually carries its Id: try exact, then version-tolerant, GETting
        # only those; the others only when none matched by path (one GET each).
        ranked = sorted(((registry_lib.registry_match(wanted, path), path) for path in members), key=lambda r: -r[0])
        by_path = [path for score, path in ranked if score]
        rest = [path for score, path in ranked if not score]
        for group in (by_path, rest):
            entries = []
            for path in group:
                entry = self._fetch(path)
                if not isinstance(entry, dict):
                    continue
                score = registry_lib.registry_match(wanted, entry.get("Id"), entry.get("Registry"), path)
                if score:
                    entries.append((score, path, entry))
            for _score, _path, entry in sorted(entries, key=lambda e: -e[0]):
                doc, uri = self._registry_document(wanted, entry, tried)
                if doc is not None:
                    return doc, uri, tried
            if entries:
                break
        # Vendor places seen in the wild: Dell links Bios/BiosRegistry, HPE keeps a registry store.
        for uri in (self.bios_path.rstrip("/") + "/BiosRegistry",
                    "/redfish/v1/registrystore/registries/en/%s" % wanted.lower()):
            tried.append(uri)
            doc = self._fetch(uri)
            if registry_lib.has_entries(doc):
                return doc, uri, tried
        return None, None, tried

    def _local_document(self, entry):
        """The first document a MessageRegistryFile's Location serves from this BMC (English
        first), with its Uri; (None, None) when none answers. A PublicationUri is never read here:
        a scan reads every member, and the registry of this BIOS is served by its own BMC."""
        for kind, uri in registry_lib.locations(entry):
            doc = self._fetch(uri) if kind == "Uri" else None
            if isinstance(doc, dict):
                return doc, uri
        return None, None

    def _scan_registries(self):
        """A Bios that names no AttributeRegistry: read every /redfish/v1/Registries member and the
        document it locates, keep the attribute registries, pick the one matching the Bios's
        attributes (bios_registry.select_registry). -> (document, uri, how) or (None, None, why).
        Two that match equally are an error: validating against the wrong one is worse than none."""
        coll, members = self._registry_members()
        candidates = []
        for path in members:
            entry = self._fetch(path)
            doc, uri = self._local_document(entry) if isinstance(entry, dict) else (None, None)
            if registry_lib.is_attribute_registry(doc):
                candidates.append({"id": doc.get("Id") or entry.get("Id") or path, "uri": uri, "document": doc,
                                   "names": registry_lib.attribute_names(doc), "language": doc.get("Language")})
        picked = registry_lib.select_registry(candidates, self.raw_current)
        where = "%s (%d members read)" % (coll, len(members)) if members else "the service lists no registries"
        if picked["ambiguous"]:
            raise BiosError("BMC %s: the Bios resource names no AttributeRegistry and %s in %s; not guessing which one "
                            "describes this BIOS, nothing written" % (self.client.name, picked["problem"], where))
        if picked["choice"] is None:
            return None, None, "%s in %s" % (picked["problem"], where) if members else where
        choice = picked["choice"]
        return choice["document"], choice["uri"], "%s, found in %s" % (picked["how"], where)

    # -- Dell jobs -------------------------------------------------------------------------------
    def manager_path(self):
        return link(self.system, "Links", "ManagedBy")

    def jobs_path(self):
        """Where Dell lists jobs: Links.Oem.Dell.Jobs of the manager (iDRAC 9/6), else <manager>/Jobs."""
        manager = self.manager_path()
        if not manager:
            return None
        return link(self.client.get(manager), "Links", "Oem", "Dell", "Jobs") or manager.rstrip("/") + "/Jobs"

    def bios_job(self):
        """The newest BIOS configuration job that is Scheduled/Running/New, or None."""
        path = self.jobs_path()
        if not path:
            return None
        found = None
        for member in members(self.client.name, path, self.client.get(path)):
            job = self.client.get(member["@odata.id"]) if "JobState" not in member else member
            if job.get("JobType") == "BIOSConfiguration" and job.get("JobState") in ("Scheduled", "Running", "New"):
                found = job
        return found

    def needs_job(self):
        return bool(self.vendor and PROFILES[self.vendor]["config_job"])

    def create_job(self):
        """POST {"TargetSettingsURI": <settings object>} to <manager>/Jobs: the endpoint Dell's own
        scripts and community.general use on iDRAC 8/9 (the Oem/Dell/Jobs link is for reading)."""
        manager = self.manager_path()
        if not manager:
            raise BiosError("BMC %s: Dell system without Links.ManagedBy: cannot schedule the BIOS configuration job"
                            % self.client.name)
        resp = self.client.post(manager.rstrip("/") + "/Jobs", {"TargetSettingsURI": self.settings_path})
        return resp.header("Location")

    def write(self, attributes):
        """PATCH only the given attributes to the settings object, with If-Match when the settings
        object has an ETag (AMI answers 428 without it), OnReset only where advertised. A 412/428
        gets one retry with a fresh ETag. Returns the job URI Dell reports in Location, if any."""
        body = {"Attributes": attributes}
        if "OnReset" in self.apply_times:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
        try:
            resp = self.client.patch(self.settings_path, body, {"If-Match": self.etag} if self.etag else None)
        except RedfishError as exc:
            if exc.status not in (412, 428):
                raise
            _body, self.etag = self.client.get_with_etag(self.settings_path)
            if not self.etag:
                raise BiosError("BMC %s: PATCH %s answered %d (precondition) and the settings object has no ETag to "
                                "send in If-Match" % (self.client.name, self.settings_path, exc.status), exc.status)
            resp = self.client.patch(self.settings_path, body, {"If-Match": self.etag})
        location = resp.header("Location")
        if location and "/Jobs/" in location:
            return location
        return None
