"""The BMC twin's BIOS model: flavour data, current/pending attributes, Dell config jobs, state file.

Pure Python (no Flask) so that the lab and the tests can drive it directly. serve.py puts it
behind sushy-emulator. The state file is the contract the lab reads:

    <state-dir>/<name>/bios.json
    {"vendor": "dell", "current": {...raw...}, "pending": {...raw...},
     "settings": {"snc": "snc4", "hyperthreading": true, ...}, "power": "On"}
"""
import hashlib
import json
import os
import random
import tempfile
import threading

import yaml

FLAVOURS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flavours")
FLAVOURS = ("dell", "lenovo", "ami", "hpe", "supermicro")
PORTABLE = ("snc", "hyperthreading", "vtx", "vtd", "sriov", "acs")
# ResetTypes after which the host boots through its BIOS, so pending settings take effect.
BOOTING_RESETS = ("On", "ForceOn", "GracefulRestart", "ForceRestart", "PowerCycle")


class BmcError(Exception):
    """A request the BMC refuses: HTTP status, Redfish MessageId, message."""

    def __init__(self, status, message_id, message, related=None):
        super().__init__(message)
        self.status = status
        self.message_id = message_id
        self.message = message
        self.related = related or []

    def body(self):
        return {"error": {"code": self.message_id, "message": self.message,
                          "@Message.ExtendedInfo": [{
                              "MessageId": self.message_id, "Message": self.message,
                              "RelatedProperties": self.related, "Severity": "Warning"}]}}


def load_flavour(vendor):
    """Read lab/bmc/flavours/<vendor>.yml and check that its settings map names real attributes."""
    if vendor not in FLAVOURS:
        raise ValueError("unknown BMC flavour %r (known: %s)" % (vendor, ", ".join(FLAVOURS)))
    with open(os.path.join(FLAVOURS_DIR, vendor + ".yml")) as handle:
        flavour = yaml.safe_load(handle)
    attrs = flavour["attributes"]
    for key in PORTABLE:
        spec = flavour["settings"][key]
        if "fixed" in spec:
            continue
        name = spec["attribute"]
        if name not in attrs:
            raise ValueError("flavour %s: setting %s names unknown attribute %s" % (vendor, key, name))
        missing = [v for v in spec["map"] if v not in attrs[name]["values"]]
        if missing:
            raise ValueError("flavour %s: setting %s maps values %s not allowed for %s" % (vendor, key, missing, name))
    for name, lock in (flavour.get("locks") or {}).items():
        if name not in attrs or lock["attribute"] not in attrs:
            raise ValueError("flavour %s: lock %s -> %s names an unknown attribute" % (vendor, name, lock["attribute"]))
    return flavour


def defaults(flavour):
    return {name: spec["default"] for name, spec in flavour["attributes"].items()}


def derive_settings(flavour, current):
    """Portable settings as the host would see them after boot, from raw current attributes."""
    out = {}
    for key in PORTABLE:
        spec = flavour["settings"][key]
        if "fixed" in spec:
            out[key] = spec["fixed"]
        else:
            out[key] = spec["map"].get(current.get(spec["attribute"]))
    return out


def check_value(flavour, name, value):
    """Raise BmcError as a BMC does for an unknown attribute or a value outside the registry.
    An attribute under a lock (a registry ReadOnly Dependency) is judged by its lock, in patch()."""
    spec = flavour["attributes"].get(name)
    if spec is None:
        raise BmcError(400, "Base.1.12.PropertyUnknown",
                       "The property %s is not in the list of valid properties for the resource." % name,
                       ["#/Attributes/%s" % name])
    if spec.get("read_only") and name not in (flavour.get("locks") or {}):
        raise BmcError(400, "Base.1.12.PropertyNotWritable",
                       "The property %s is a read only property and cannot be assigned a value." % name,
                       ["#/Attributes/%s" % name])
    kind = spec.get("type", "Enumeration")
    ok = (value in spec["values"]) if kind == "Enumeration" else isinstance(value, str)
    if not ok:
        raise BmcError(400, "Base.1.12.PropertyValueNotInList",
                       "The value %r for the property %s is not in the list of acceptable values." % (value, name),
                       ["#/Attributes/%s" % name])


def locked(lock, ruling):
    """A lock {attribute, value, condition} holds: NEQ (default) while the ruling attribute is not
    the value (Dell: ProcCStates while SysProfile is not Custom), EQU while it is."""
    if lock.get("condition", "NEQ") == "EQU":
        return ruling == lock["value"]
    return ruling != lock["value"]


def registry_document(flavour):
    """The flavour's AttributeRegistry resource (DMTF AttributeRegistry schema): the capture's entries
    (DisplayName, HelpText, MenuPath, ValueDisplayName, ReadOnly), locks as Dependencies."""
    entries = []
    for name, spec in flavour["attributes"].items():
        kind = spec.get("type", "Enumeration")
        entry = {"AttributeName": name, "DisplayName": spec.get("display", name), "HelpText": spec.get("help", ""),
                 "MenuPath": spec.get("menu", "./"), "Type": kind,
                 "ReadOnly": bool(spec.get("read_only")), "Hidden": False, "Immutable": False,
                 "DefaultValue": spec["default"], "CurrentValue": None}
        if kind == "Enumeration":
            shown = spec.get("shown") or {}
            entry["Value"] = [{"ValueName": v, "ValueDisplayName": shown.get(v, v)} for v in spec["values"]]
        entries.append(entry)
    deps = []
    for name, lock in (flavour.get("locks") or {}).items():
        deps.append({"DependencyFor": name, "Type": "Map", "Dependency": {
            "MapFrom": [{"MapFromAttribute": lock["attribute"], "MapFromCondition": lock.get("condition", "NEQ"),
                         "MapFromProperty": "CurrentValue", "MapFromValue": lock["value"]}],
            "MapToAttribute": name, "MapToProperty": "ReadOnly", "MapToValue": True}})
    reg = flavour["registry"]
    return {
        "@odata.id": reg["uri"],
        "@odata.type": "#AttributeRegistry.v1_3_6.AttributeRegistry",
        "Id": reg.get("document_id", reg["id"]), "Name": "BIOS Attribute Registry",
        "Language": reg.get("language", "en"), "OwningEntity": reg.get("owning_entity", flavour["manufacturer"]),
        "RegistryVersion": "1.0.0",
        "RegistryEntries": {"Attributes": entries, "Dependencies": deps},
    }


def _atomic_write(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


class BiosModel:
    """Current and pending BIOS attributes of one twin, persisted to <state-dir>/<name>/bios.json."""

    def __init__(self, flavour, state_dir, name):
        self.flavour = flavour
        self.name = name
        self.dir = os.path.join(state_dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.path = os.path.join(self.dir, "bios.json")
        self.jobs_path = os.path.join(self.dir, "jobs.json")
        self.faults_path = os.path.join(self.dir, "faults.json")
        self.lock = threading.RLock()
        self.jobs = {}
        if os.path.exists(self.path):
            # A restarted BMC keeps what it had: bios.json wins over bios-initial.json.
            with open(self.path) as handle:
                saved = json.load(handle)
            if saved.get("vendor") != flavour["vendor"]:
                raise ValueError("%s: state is for vendor %r, this BMC is %r" % (self.path, saved.get("vendor"), flavour["vendor"]))
            self.current = saved["current"]
            self.pending = saved["pending"]
            self.power = saved.get("power", "On")
            if os.path.exists(self.jobs_path):
                with open(self.jobs_path) as handle:
                    self.jobs = json.load(handle)
        else:
            self.current = defaults(flavour)
            initial = os.path.join(self.dir, "bios-initial.json")
            if os.path.exists(initial):
                with open(initial) as handle:
                    overrides = json.load(handle)
                if not isinstance(overrides, dict):
                    raise ValueError("%s: expected a JSON object of raw BIOS attributes" % initial)
                for key, value in overrides.items():
                    try:
                        spec = flavour["attributes"][key]
                        if spec.get("type", "Enumeration") == "Enumeration" and value not in spec["values"]:
                            raise KeyError(key)
                    except KeyError:
                        raise ValueError("%s: %s=%r is not a %s attribute/value (known: %s)" % (
                            initial, key, value, flavour["vendor"], ", ".join(sorted(flavour["attributes"]))))
                self.current.update(overrides)
            self.pending = {}
            self.power = "On"
        self.save()

    # -- state file -------------------------------------------------------------------------
    def state(self):
        return {"vendor": self.flavour["vendor"], "current": dict(self.current), "pending": dict(self.pending),
                "settings": derive_settings(self.flavour, self.current), "power": self.power}

    def save(self):
        with self.lock:
            _atomic_write(self.path, self.state())
            if self.flavour.get("config_job"):
                _atomic_write(self.jobs_path, self.jobs)

    def set_power(self, power):
        with self.lock:
            if power != self.power:
                self.power = power
                self.save()

    # -- faults -------------------------------------------------------------------------------
    def _faults(self):
        try:
            with open(self.faults_path) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {}

    def fault(self, name):
        """Value of a switch in faults.json ({"stuck_job": true, "ignore_graceful": true, ...})."""
        return self._faults().get(name)

    def take_503(self):
        """True when faults.json {"http_503": N} still has N > 0 (decremented on each use)."""
        with self.lock:
            faults = self._faults()
            count = int(faults.get("http_503", 0) or 0)
            if count <= 0:
                return False
            faults["http_503"] = count - 1
            _atomic_write(self.faults_path, faults)
            return True

    # -- BIOS -----------------------------------------------------------------------------------
    def effective(self, name):
        return self.pending.get(name, self.current.get(name))

    def patch(self, attributes):
        """Validate every attribute first, then store them all as pending (all or nothing)."""
        if not isinstance(attributes, dict) or not attributes:
            raise BmcError(400, "Base.1.12.PropertyMissing", "The request body must carry a non-empty Attributes object.")
        with self.lock:
            if self.scheduled_job():
                raise BmcError(400, "IDRAC.2.8.SYS011",
                               "Pending configuration values are already committed, unable to perform another set operation.")
            for name, value in attributes.items():
                check_value(self.flavour, name, value)
            locks = self.flavour.get("locks") or {}
            for name in attributes:
                lock = locks.get(name)
                if lock is None:
                    continue
                ruling = attributes.get(lock["attribute"], self.effective(lock["attribute"]))
                if locked(lock, ruling):
                    raise BmcError(400, "Base.1.12.PropertyNotWritable",
                                   "The property %s is read only because %s is %s." % (
                                       name, lock["attribute"], ruling), ["#/Attributes/%s" % name])
            self.pending.update(attributes)
            if self.flavour.get("settings_full"):
                # a settings object that holds every attribute cannot tell "pending" from "equal to current"
                self.pending = dict((k, v) for k, v in self.pending.items() if self.current.get(k) != v)
            self.save()

    def reset(self, reset_type, was_power):
        """Apply pending attributes when the reset boots the host (Dell: through a scheduled job)."""
        with self.lock:
            boots = reset_type in BOOTING_RESETS and not (reset_type in ("On", "ForceOn") and was_power == "On")
            if boots:
                if self.flavour.get("config_job"):
                    job = self.scheduled_job()
                    if job is not None:
                        if self._faults().get("stuck_job"):
                            job["Message"] = "Job processing initialization failure."
                            job["MessageId"] = "SYS051"
                        else:
                            self.current.update(self.pending)
                            self.pending = {}
                            job.update(JobState="Completed", PercentComplete=100,
                                       Message="Job completed successfully.", MessageId="PR19")
                else:
                    self.current.update(self.pending)
                    self.pending = {}
            self.save()
            return boots

    # -- Dell config jobs -----------------------------------------------------------------------
    def scheduled_job(self):
        for job in self.jobs.values():
            if job["JobState"] == "Scheduled" and job["JobType"] == "BIOSConfiguration":
                return job
        return None

    def etag(self):
        """The settings object's ETag: changes whenever current or pending does (a PATCH, a reset)."""
        digest = hashlib.sha1(json.dumps([self.current, self.pending], sort_keys=True).encode()).hexdigest()
        return '"%s"' % digest[:20]

    def create_job(self, jobs_uri, target):
        with self.lock:
            if target != self.flavour["settings_path"]:
                raise BmcError(400, "IDRAC.2.8.SYS030", "Invalid TargetSettingsURI %r." % (target,))
            if self.scheduled_job():
                raise BmcError(400, "IDRAC.2.8.SYS011",
                               "Pending configuration values are already committed, unable to perform another set operation.")
            if not self.pending:
                raise BmcError(400, "IDRAC.2.8.SYS031", "Unable to create a configuration job because there are no pending changes.")
            jid = "JID_%012d" % random.randint(0, 10 ** 12 - 1)
            job = {"@odata.id": "%s/%s" % (jobs_uri, jid), "@odata.type": "#DellJob.v1_0_2.DellJob",
                   "Id": jid, "Name": "Configure: BIOS.Setup.1-1", "JobType": "BIOSConfiguration",
                   "JobState": "Scheduled", "Message": "Task successfully scheduled.", "MessageId": "JCP001",
                   "PercentComplete": 0, "TargetSettingsURI": None}
            self.jobs[jid] = job
            self.save()
            return job
