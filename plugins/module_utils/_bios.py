# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""BIOS settings through Redfish: vendor profiles as data, pure diff/pending logic, and the flow.

The trap this avoids (community.general bug reports): comparing desired values with the current
attributes only re-PATCHes on every run while a change waits for the reboot. Every desired
attribute is classified against current AND pending:

    current == desired, pending absent or equal   -> "current"  (nothing to do)
    current != desired, pending == desired        -> "pending"  (no write, reboot required)
    anything else (incl. a pending value that
    would undo a correct current one)             -> "write"

Vendor attribute names and values below are defaults: every name and value is checked against
the BMC's attribute registry before anything is written. Sources: DMTF/vendor Redfish samples,
vendor BIOS references; names marked unverified in docs/redfish.md.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib

from ansible_collections.gpufleet.provision.plugins.module_utils._redfish import RedfishError, link

PORTABLE_SETTINGS = ("snc", "hyperthreading", "vtx", "vtd", "sriov", "acs", "power_profile")
SNC_VALUES = ("off", "snc2", "snc4", "nps1", "nps2", "nps4")
POWER_PROFILES = ("performance", "efficiency", "custom")

_ON_OFF = {True: "Enabled", False: "Disabled"}
_AMI_ON_OFF = {True: "Enable", False: "Disable"}

# Portable setting -> vendor attribute and the raw value for each portable value.
PROFILES = {
    "dell": {
        "match": ("dell",),
        "settings": {
            "snc": ("SubNumaCluster", {"off": "Disabled", "snc2": "2WayClustering", "snc4": "4WayClustering"}),
            "hyperthreading": ("LogicalProc", _ON_OFF),
            # One BIOS switch covers VT-x and VT-d on PowerEdge ("Virtualization Technology").
            "vtx": ("ProcVirtualization", _ON_OFF),
            "vtd": ("ProcVirtualization", _ON_OFF),
            "sriov": ("SriovGlobalEnable", _ON_OFF),
            "power_profile": ("SysProfile", {"performance": "PerfOptimized", "efficiency": "PerfPerWattOptimizedDapc",
                                             "custom": "Custom"}),
        },
        # iDRAC keeps these read-only unless SysProfile is Custom: set it first, in the same PATCH.
        "requires": {
            "ProcCStates": ("SysProfile", "Custom"),
            "ProcC1E": ("SysProfile", "Custom"),
            "ProcTurboMode": ("SysProfile", "Custom"),
            "ProcPwrPerf": ("SysProfile", "Custom"),
            "EnergyPerformanceBias": ("SysProfile", "Custom"),
            "UncoreFrequency": ("SysProfile", "Custom"),
        },
        "config_job": True,
    },
    "lenovo": {
        "match": ("lenovo",),
        "settings": {
            "snc": ("Processors_SNC", {"off": "Disabled", "snc2": "SNC2", "snc4": "SNC4"}),
            "hyperthreading": ("Processors_HyperThreading", _ON_OFF),
            "vtx": ("Processors_IntelVirtualizationTechnology", _ON_OFF),
            "vtd": ("DevicesandIOPorts_IntelVTforDirectedIOVTd", _ON_OFF),
            "sriov": ("DevicesandIOPorts_SRIOV", _ON_OFF),
            "acs": ("Processors_PCIeACSCTL", _ON_OFF),
            "power_profile": ("OperatingModes_ChooseOperatingMode", {"performance": "MaximumPerformance",
                                                                     "efficiency": "MaximumEfficiency",
                                                                     "custom": "CustomMode"}),
        },
        "requires": {},
        "config_job": False,
    },
    "hpe": {
        "match": ("hpe", "hewlett packard", "hp"),
        "settings": {
            # iLO: "Enabled" means SNC2 (two clusters per socket). Unverified.
            "snc": ("SubNumaClustering", {"off": "Disabled", "snc2": "Enabled", "snc4": "Snc4"}),
            "hyperthreading": ("ProcHyperthreading", _ON_OFF),
            "vtx": ("ProcVirtualization", _ON_OFF),
            "vtd": ("IntelProcVtd", _ON_OFF),
            "sriov": ("Sriov", _ON_OFF),
            "power_profile": ("WorkloadProfile", {"performance": "HighPerformanceCompute",
                                                  "efficiency": "GeneralPowerEfficientCompute", "custom": "Custom"}),
        },
        "requires": {},
        "config_job": False,
    },
    "supermicro": {
        "match": ("supermicro",),
        # Unverified: Supermicro names carry a build-specific suffix. Override with `attributes`.
        "settings": {
            "snc": ("SNC#0232", {"off": "Disable", "snc2": "Enable SNC2 (2-clusters)", "snc4": "Enable SNC4 (4-clusters)"}),
            "hyperthreading": ("Hyper-Threading#01A7", _AMI_ON_OFF),
            "vtx": ("IntelVirtualizationTechnology#01A9", _AMI_ON_OFF),
            "vtd": ("IntelVT_dTechnology#0241", _AMI_ON_OFF),
            "sriov": ("SR_IOVSupport#0197", _AMI_ON_OFF),
            "acs": ("ACSControl#0245", _AMI_ON_OFF),
            "power_profile": ("PowerTechnology#01B7", {"performance": "Disable", "efficiency": "Energy Efficient",
                                                       "custom": "Custom"}),
        },
        "requires": {},
        "config_job": False,
    },
    "ami": {
        "match": ("ami", "american megatrends", "nvidia"),
        "settings": {
            "snc": ("SncEn", {"off": "Disable", "snc2": "Enable SNC2", "snc4": "Enable SNC4"}),
            "hyperthreading": ("ProcessorHyperThreading", _AMI_ON_OFF),
            "vtx": ("ProcessorVmxEnable", _AMI_ON_OFF),
            "vtd": ("VTdSupport", _AMI_ON_OFF),
            "sriov": ("SRIOVEnable", _AMI_ON_OFF),
            "acs": ("PCIeACSControl", _AMI_ON_OFF),
            "power_profile": ("ProcessorEppProfile", {"performance": "Performance", "efficiency": "Balanced Power"}),
        },
        "requires": {},
        "config_job": False,
    },
}
VENDORS = tuple(sorted(PROFILES))


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


def translate(vendor, settings):
    """Portable settings -> {raw attribute: value}. Fails on unmapped keys and on conflicts."""
    profile = PROFILES[vendor]["settings"]
    out = {}
    origin = {}
    for key in PORTABLE_SETTINGS:
        if key not in (settings or {}) or settings[key] is None:
            continue
        value = settings[key]
        if key not in profile:
            raise BiosError("vendor profile %s has no BIOS attribute for setting %s (mapped: %s); "
                            "use attributes with the raw name instead" % (vendor, key, ", ".join(sorted(profile))))
        name, values = profile[key]
        if value not in values:
            raise BiosError("setting %s=%r is not available in vendor profile %s (choices: %s)" % (
                key, value, vendor, ", ".join(str(v) for v in values)))
        raw = values[value]
        if name in out and out[name] != raw:
            raise BiosError("settings %s and %s both map to %s attribute %s but want %r and %r" % (
                origin[name], key, vendor, name, out[name], raw))
        out[name] = raw
        origin[name] = key
    unknown = sorted(set(settings or {}) - set(PORTABLE_SETTINGS))
    if unknown:
        raise BiosError("unknown portable settings %s (known: %s)" % (", ".join(unknown), ", ".join(PORTABLE_SETTINGS)))
    return out


def merge_desired(attributes, translated):
    """Raw attributes win over nothing: the same name from both with different values is an error."""
    out = dict(translated)
    for name, value in (attributes or {}).items():
        if name in out and out[name] != value:
            raise BiosError("attribute %s=%r conflicts with %r from settings" % (name, value, out[name]))
        out[name] = value
    return out


def parse_registry(document):
    """AttributeRegistry resource -> {name: {"type", "values" (list or None), "read_only"}}.

    Sample: {"RegistryEntries": {"Attributes": [{"AttributeName": "LogicalProc", "Type": "Enumeration",
             "ReadOnly": false, "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]}]}}
    """
    out = {}
    for entry in ((document or {}).get("RegistryEntries") or {}).get("Attributes") or []:
        name = entry.get("AttributeName")
        if not name:
            continue
        values = None
        if entry.get("Type") == "Enumeration":
            values = [v.get("ValueName") for v in entry.get("Value") or [] if isinstance(v, dict)]
        out[name] = {"type": entry.get("Type"), "values": values, "read_only": bool(entry.get("ReadOnly"))}
    return out


def coerce(desired, registry):
    """Match YAML-typed input to the registry's types (Integer "3" -> 3, Boolean "true" -> True)."""
    out = {}
    for name, value in desired.items():
        kind = (registry.get(name) or {}).get("type")
        if kind == "Integer" and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        elif kind == "Boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        out[name] = value
    return out


def validate(bmc, desired, registry, current):
    """Every name known and every value allowed, or one error listing all problems. No registry:
    names must at least exist among the current attributes (a Bios resource lists all of them)."""
    problems = []
    known = registry if registry else current
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
        if spec["read_only"]:
            problems.append("attribute %s is read-only in the registry" % name)
        elif spec["values"] is not None and value not in spec["values"]:
            problems.append("attribute %s: value %r not allowed (allowed: %s)" % (name, value, ", ".join(map(str, spec["values"]))))
        elif spec["type"] == "Integer" and (isinstance(value, bool) or not isinstance(value, int)):
            problems.append("attribute %s: value %r is not an integer" % (name, value))
        elif spec["type"] == "Boolean" and not isinstance(value, bool):
            problems.append("attribute %s: value %r is not a boolean" % (name, value))
    if problems:
        raise BiosError("BMC %s: nothing written: %s" % (bmc, "; ".join(problems)))


def add_dependencies(vendor, desired):
    """Prepend controlling attributes a vendor requires (Dell SysProfile=Custom).

    Returns (ordered desired dict, {controller: reason}) - controllers first so one PATCH works.
    """
    requires = PROFILES[vendor]["requires"] if vendor in PROFILES else {}
    deps = {}
    reasons = {}
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
    ordered = dict(deps)
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
    message = job.get("Message") or ""
    if job.get("JobState") in ("Failed", "CompletedWithErrors") or (
            job.get("JobState") == "Scheduled" and any(m in message.lower() for m in STUCK_MARKERS)):
        return ("Dell BIOS configuration job %s is %s with %r: it will not apply the pending values; "
                "delete the job and the pending BIOS configuration (or reset iDRAC), then run again" % (
                    job.get("Id"), job.get("JobState"), message))
    return None


class Bios:
    """The I/O flow over a RedfishClient: discover, read, validate, plan, write. No Ansible here."""

    def __init__(self, client, system_id=None, vendor="auto"):
        self.client = client
        self.system_path, self.system = client.find_system(system_id)
        manufacturer = self.system.get("Manufacturer")
        if vendor in (None, "", "auto"):
            vendor = detect_vendor(manufacturer)
            if vendor is None:
                raise BiosError("BMC %s: cannot tell the vendor from Manufacturer %r; set vendor (one of %s)" % (
                    client.name, manufacturer, ", ".join(VENDORS)))
        elif vendor not in PROFILES:
            raise BiosError("vendor %r unknown (known: %s)" % (vendor, ", ".join(VENDORS)))
        self.vendor = vendor
        self.bios_path = link(self.system, "Bios")
        if not self.bios_path:
            raise BiosError("BMC %s: system %s has no Bios link" % (client.name, self.system_path))
        self.bios = client.get(self.bios_path)
        settings = self.bios.get("@Redfish.Settings") or {}
        self.settings_path = link(settings, "SettingsObject")
        if not self.settings_path:
            raise BiosError("BMC %s: %s has no @Redfish.Settings.SettingsObject, so pending values cannot be told "
                            "from current ones; refusing to write" % (client.name, self.bios_path))
        self.apply_times = settings.get("SupportedApplyTimes") or []
        self.current = self.bios.get("Attributes") or {}
        self.pending = client.get(self.settings_path).get("Attributes") or {}
        self.registry = {}
        self.registry_uri = None

    def load_registry(self):
        """Find the AttributeRegistry named by the Bios resource under /redfish/v1/Registries."""
        wanted = self.bios.get("AttributeRegistry")
        if not wanted:
            return {}
        root = self.client.get("/redfish/v1")
        coll = link(root, "Registries")
        if not coll:
            return {}
        for member in self.client.get(coll).get("Members") or []:
            path = member.get("@odata.id")
            if not path:
                continue
            entry = self.client.get(path)
            if wanted not in (entry.get("Registry"), entry.get("Id")) and not path.endswith("/" + wanted):
                continue
            # Location: [{"Language": "en-US", "Uri": ".../BiosAttributeRegistryProt0.208.208.0.json"}]
            uris = [loc.get("Uri") for loc in entry.get("Location") or [] if loc.get("Uri")]
            english = [loc.get("Uri") for loc in entry.get("Location") or []
                       if loc.get("Uri") and str(loc.get("Language") or "en").lower().startswith("en")]
            if english or uris:
                self.registry_uri = (english or uris)[0]
                self.registry = parse_registry(self.client.get(self.registry_uri))
                return self.registry
        return {}

    # -- Dell jobs -------------------------------------------------------------------------------
    def jobs_path(self):
        manager = link(self.system, "Links", "ManagedBy")
        if not manager:
            return None
        return link(self.client.get(manager), "Links", "Oem", "Dell", "Jobs")

    def bios_job(self):
        """The newest BIOS configuration job that is Scheduled/Running/Failed-stuck, or None."""
        path = self.jobs_path()
        if not path:
            return None
        found = None
        for member in self.client.get(path).get("Members") or []:
            job = self.client.get(member["@odata.id"]) if "JobState" not in member else member
            if job.get("JobType") == "BIOSConfiguration" and job.get("JobState") in ("Scheduled", "Running", "New"):
                found = job
        return found

    def needs_job(self):
        return PROFILES[self.vendor]["config_job"]

    def create_job(self):
        path = self.jobs_path()
        if not path:
            raise BiosError("BMC %s: Dell system without Links.Oem.Dell.Jobs on its manager: cannot schedule the "
                            "BIOS configuration job" % self.client.name)
        resp = self.client.post(path, {"TargetSettingsURI": self.settings_path})
        return resp.header("Location")

    def write(self, attributes):
        """PATCH only the given attributes to the settings object, OnReset where supported.

        Returns the job URI Dell reports in Location, if any."""
        body = {"Attributes": attributes}
        if "OnReset" in self.apply_times:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
        resp = self.client.patch(self.settings_path, body)
        location = resp.header("Location")
        if location and "/Jobs/" in location:
            return location
        return None
