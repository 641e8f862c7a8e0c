# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The BIOS attribute registry (DMTF AttributeRegistry): where it is, what it says. Pure functions.

A registry document, as real BMCs serve it (trimmed; Dell R750, iDRAC 6):

    {"Id": "BiosAttributeRegistry.v1_0_3", "OwningEntity": "Dell",
     "RegistryEntries": {
       "Attributes": [{"AttributeName": "SubNumaCluster", "DisplayName": "Sub NUMA Cluster",
                       "HelpText": "...", "MenuPath": "./ProcSettingsRef", "Type": "Enumeration",
                       "ReadOnly": false, "Value": [{"ValueName": "2-Way", "ValueDisplayName": "2-Way Clustering"},
                                                    {"ValueName": "Disabled", "ValueDisplayName": "Disabled"}]}],
       "Dependencies": [{"DependencyFor": "ProcCStates", "Type": "Map", "Dependency": {
           "MapFrom": [{"MapFromAttribute": "SysProfile", "MapFromCondition": "NEQ",
                        "MapFromProperty": "CurrentValue", "MapFromValue": "Custom"}],
           "MapToAttribute": "ProcCStates", "MapToProperty": "ReadOnly", "MapToValue": true}}]}}

`ReadOnly: true` with a ReadOnly Dependency is a state, not a fact: ProcCStates is writable once
SysProfile is Custom. Values may be given by ValueDisplayName (some BMCs report those in
Attributes); they are mapped to the ValueName the BMC accepts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import describe as json_kind

_VERSION = re.compile(r"[._-]v?\d+(?:[._]\d+)*$", re.I)
_LANGUAGE = re.compile(r"\.[a-z]{2}(?:-[a-z]{2})?$", re.I)


def registry_base(name):
    """Registry name without version and language: "BiosAttributeRegistry.v1_0_3" -> "biosattributeregistry",
    "BiosAttributeRegistry113.en-US.1.1.3" -> "biosattributeregistry113", "...A42.v1_2_60" -> "...a42"."""
    text = (name or "").strip().rstrip("/").rsplit("/", 1)[-1]
    text = re.sub(r"\.json$", "", text, flags=re.I)
    text = _VERSION.sub("", text)
    text = _LANGUAGE.sub("", text)
    return text.lower()


def registry_match(wanted, *names):
    """2 when one of ``names`` is ``wanted`` (case aside), 1 when only the versions differ, else 0."""
    best = 0
    for name in names:
        if not name:
            continue
        short = str(name).rstrip("/").rsplit("/", 1)[-1]
        if short.lower() == wanted.lower():
            return 2
        if registry_base(short) == registry_base(wanted):
            best = 1
    return best


def locations(entry):
    """Where a MessageRegistryFile says its document is: [(kind, uri)], English first.

    Sample: {"Location": [{"Language": "en", "Uri": "/redfish/v1/registrystore/registries/en/bios..."},
                          {"Language": "ja", "Uri": ".../ja/..."}, {"PublicationUri": "https://..."}]}
    """
    out = []
    locs = [loc for loc in (entry or {}).get("Location") or [] if isinstance(loc, dict)]
    locs.sort(key=lambda loc: 0 if str(loc.get("Language") or "en").lower().startswith("en") else 1)
    for kind in ("Uri", "PublicationUri"):
        out.extend((kind, loc[kind]) for loc in locs if isinstance(loc.get(kind), str) and loc[kind])
    return out


def has_entries(document):
    """Whether a document claims to be an attribute registry (it has RegistryEntries); whether it is
    a well-formed one is shape_problem's question."""
    return isinstance(document, dict) and document.get("RegistryEntries") is not None


# What parse_registry / parse_dependencies rely on, checked once on the document a BMC served.
_ENTRY_KINDS = (("Type", str), ("DisplayName", str), ("HelpText", str), ("MenuPath", str), ("Value", list),
                ("LowerBound", (int, float)), ("UpperBound", (int, float)))
_KIND_NAMES = {str: "a string", list: "a list", dict: "an object", (int, float): "a number"}


def _field_problem(where, doc, key, kind):
    value = doc.get(key)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return None
    return "%s.%s is %s; expected %s" % (where, key, json_kind(value), _KIND_NAMES[kind])


def _entry_problem(where, entry):
    if not isinstance(entry, dict):
        return "%s is %s; expected an object" % (where, json_kind(entry))
    if not isinstance(entry.get("AttributeName"), str) or not entry["AttributeName"]:
        return "%s has no AttributeName string" % where
    where = "%s (%s)" % (where, entry["AttributeName"])
    for key, kind in _ENTRY_KINDS:
        problem = _field_problem(where, entry, key, kind)
        if problem:
            return problem
    for value in entry.get("Value") or []:
        if not isinstance(value, dict) or any(value.get(key) is not None and not isinstance(value[key], str)
                                              for key in ("ValueName", "ValueDisplayName")):
            return "%s.Value holds %s; expected objects whose ValueName is a string" % (where, json_kind(value))
    return None


def _dependency_problem(where, dep):
    if not isinstance(dep, dict) or not isinstance(dep.get("Dependency") or {}, dict):
        return "%s is %s; expected an object whose Dependency is an object" % (where, json_kind(dep))
    body = dep.get("Dependency") or {}
    problem = _field_problem(where + ".Dependency", body, "MapToAttribute", str) or \
        _field_problem(where + ".Dependency", body, "MapFrom", list)
    if problem:
        return problem
    for term in body.get("MapFrom") or []:
        if not isinstance(term, dict):
            return "%s.Dependency.MapFrom holds %s; expected objects" % (where, json_kind(term))
        for key in ("MapFromAttribute", "MapFromCondition", "MapFromProperty"):
            problem = _field_problem(where + ".Dependency.MapFrom[]", term, key, str)
            if problem:
                return problem
    return None


def shape_problem(document):
    """Why an AttributeRegistry document cannot be used (the first problem found), or None:
    RegistryEntries an object; Attributes a list of objects, each with an AttributeName string and
    string/list/number properties where the schema says so; Dependencies a list of Map objects."""
    entries = document.get("RegistryEntries") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        return "RegistryEntries is %s; expected an object" % json_kind(entries)
    attributes = entries.get("Attributes")
    if not isinstance(attributes, list):
        return "RegistryEntries.Attributes is %s; expected a list" % json_kind(attributes)
    for index, entry in enumerate(attributes):
        problem = _entry_problem("RegistryEntries.Attributes[%d]" % index, entry)
        if problem:
            return problem
    dependencies = entries.get("Dependencies")
    if dependencies is not None and not isinstance(dependencies, list):
        return "RegistryEntries.Dependencies is %s; expected a list" % json_kind(dependencies)
    for index, dep in enumerate(dependencies or []):
        problem = _dependency_problem("RegistryEntries.Dependencies[%d]" % index, dep)
        if problem:
            return problem
    return None


def _truth(value):
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def parse_registry(document):
    """AttributeRegistry resource -> {name: spec}.

    spec: type, values (ValueNames, or None), display_values {ValueDisplayName: ValueName},
    read_only, display, help, menu, default, lower, upper.
    """
    out = {}
    for entry in ((document or {}).get("RegistryEntries") or {}).get("Attributes") or []:
        name = entry.get("AttributeName") if isinstance(entry, dict) else None
        if not name:
            continue
        values = None
        display_values = {}
        if entry.get("Type") == "Enumeration":
            values = []
            for val in entry.get("Value") or []:
                if not isinstance(val, dict) or val.get("ValueName") is None:
                    continue
                values.append(val["ValueName"])
                if val.get("ValueDisplayName") not in (None, ""):
                    display_values.setdefault(val["ValueDisplayName"], val["ValueName"])
        out[name] = {"type": entry.get("Type"), "values": values, "display_values": display_values,
                     "read_only": _truth(entry.get("ReadOnly")), "display": (entry.get("DisplayName") or "").strip(),
                     "help": entry.get("HelpText") or "", "menu": entry.get("MenuPath") or "",
                     "default": entry.get("DefaultValue"), "lower": entry.get("LowerBound"),
                     "upper": entry.get("UpperBound")}
    return out


def parse_dependencies(document):
    """The registry's Map dependencies that set ReadOnly: [{"for", "terms", "read_only"}].

    terms: [{"attribute", "condition", "value", "join"}] evaluated left to right; join is the
    MapTerms of a term after the first (AND/OR; absent: OR, which Dell's multi-value lists need).
    """
    out = []
    for dep in ((document or {}).get("RegistryEntries") or {}).get("Dependencies") or []:
        if not isinstance(dep, dict) or dep.get("Type", "Map") != "Map":
            continue
        body = dep.get("Dependency") or {}
        if body.get("MapToProperty") != "ReadOnly" or not body.get("MapToAttribute"):
            continue
        terms = []
        for term in body.get("MapFrom") or []:
            if not isinstance(term, dict) or term.get("MapFromProperty", "CurrentValue") != "CurrentValue":
                continue
            terms.append({"attribute": term.get("MapFromAttribute"), "condition": term.get("MapFromCondition", "EQU"),
                          "value": term.get("MapFromValue"), "join": str(term.get("MapTerms") or "OR").upper()})
        if terms:
            out.append({"for": body["MapToAttribute"], "terms": terms, "read_only": _truth(body.get("MapToValue"))})
    return out


def _compare(condition, have, want):
    if condition in ("EQU", "NEQ"):
        same = have == want or (isinstance(have, (str, bool)) and str(have).lower() == str(want).lower())
        return same if condition == "EQU" else not same
    try:
        have, want = float(have), float(want)
    except (TypeError, ValueError):
        return False
    return {"GTR": have > want, "GEQ": have >= want, "LSS": have < want, "LEQ": have <= want}.get(condition, False)


def holds(terms, values):
    """Whether a dependency's MapFrom terms hold for attribute values {name: value}."""
    result = None
    for term in terms:
        ok = _compare(term["condition"], values.get(term["attribute"]), term["value"])
        if result is None:
            result = ok
        elif term["join"] == "AND":
            result = result and ok
        else:
            result = result or ok
    return bool(result)


def describe(terms):
    return (" or ".join if all(t["join"] != "AND" for t in terms[1:]) else " and ".join)(
        "%s %s %s" % (t["attribute"], {"EQU": "is", "NEQ": "is not"}.get(t["condition"], t["condition"]), t["value"])
        for t in terms)


def lock_state(name, spec, deps, values):
    """(read_only, locking dependency or None) of ``name`` for attribute values {name: value}.

    An attribute with ReadOnly dependencies is locked exactly when one of them holds; the static
    ReadOnly flag only reflects the state the registry was generated in.
    """
    mine = [dep for dep in deps if dep["for"] == name]
    if not mine:
        return spec.get("read_only", False), None
    for dep in mine:
        if dep["read_only"] and holds(dep["terms"], values):
            return True, dep
    if any(not dep["read_only"] and holds(dep["terms"], values) for dep in mine):
        return False, None
    if spec.get("read_only") and not any(dep["read_only"] for dep in mine):
        return True, None
    return False, None


def unlock(dep, registry):
    """{attribute: value} that releases a lock, when the registry makes it unambiguous: a single
    "X is not V" term (Dell: ProcCStates is read-only while SysProfile is not Custom). Else None."""
    terms = dep["terms"]
    if len(terms) != 1 or terms[0]["condition"] != "NEQ":
        return None
    term = terms[0]
    spec = registry.get(term["attribute"])
    if spec is None or spec["read_only"] or (spec["values"] is not None and term["value"] not in spec["values"]):
        return None
    return {term["attribute"]: term["value"]}


def to_value_name(spec, value):
    """The ValueName for a value given by its ValueName or its ValueDisplayName, else the value."""
    if spec is None or spec.get("values") is None or not isinstance(value, str) or value in spec["values"]:
        return value
    return (spec.get("display_values") or {}).get(value, value)


def normalize_values(attributes, registry):
    """Attributes as a BMC reported them, with ValueDisplayNames turned into ValueNames."""
    if not registry:
        return dict(attributes)
    return dict((name, to_value_name(registry.get(name), value)) for name, value in attributes.items())


# -- Finding the registry when the Bios names none --------------------------------------------------
# A Bios resource's AttributeRegistry property is optional in the DMTF Bios schema, and some OpenBMC
# services leave it out while /redfish/v1/Registries still offers the attribute registry (a
# MessageRegistryFile whose Location Uri serves an AttributeRegistry document). The rule: the
# documents that ARE attribute registries (their @odata.type says AttributeRegistry, or, without an
# @odata.type, they carry RegistryEntries.Attributes; a MessageRegistry never counts), and among
# them the one whose AttributeNames cover the Bios's Attributes: all of them, or at least
# MATCH_SHARE of them (a Bios may report a stray attribute its registry does not describe).

MATCH_SHARE = 0.95


def is_attribute_registry(document):
    """Whether a document is a DMTF AttributeRegistry ("#AttributeRegistry.v1_3_5.AttributeRegistry")."""
    entries = document.get("RegistryEntries") if isinstance(document, dict) else None
    if not isinstance(entries, dict) or not isinstance(entries.get("Attributes"), list):
        return False
    kind = str(document.get("@odata.type") or "")
    return not kind or kind.lstrip("#").split(".", 1)[0] == "AttributeRegistry"


def attribute_names(document):
    """The AttributeNames an AttributeRegistry document describes."""
    return set(entry["AttributeName"] for entry in (document.get("RegistryEntries") or {}).get("Attributes") or []
               if isinstance(entry, dict) and isinstance(entry.get("AttributeName"), str) and entry["AttributeName"])


def coverage(names, bios_names):
    """(covered, total): how many of the Bios's attribute names the registry describes."""
    bios_names = set(bios_names)
    return len(bios_names & set(names)), len(bios_names)


def _describe(candidate, bios_names):
    covered, total = coverage(candidate["names"], bios_names)
    return "%s at %s (describes %d of the Bios's %d attributes)" % (candidate["id"], candidate["uri"], covered, total)


_LANGUAGE_TOKEN = re.compile(r"[._-][a-z]{2}(?:-[a-z]{2})?(?=[._-]|$)", re.I)


def _one_language(tied):
    """Tied candidates that are one registry in several languages (same attributes, same Id apart
    from a language token: "Bios.en-US.1.0" and "Bios.ja-JP.1.0") -> the English one, else all."""
    first = tied[0]
    key = _LANGUAGE_TOKEN.sub("", str(first["id"])).lower()
    if any(c["names"] != first["names"] or _LANGUAGE_TOKEN.sub("", str(c["id"])).lower() != key for c in tied[1:]):
        return tied
    english = [c for c in tied if str(c.get("language") or "en").lower().startswith("en")]
    return (english or tied)[:1]


def select_registry(candidates, bios_names):
    """Pick the attribute registry of a Bios that names none: {"choice", "problem", "ambiguous", "how"}.

    candidates: [{"id", "uri", "names", "language"}] (only documents that are attribute registries). A
    candidate matches when it covers at least MATCH_SHARE of bios_names (any candidate when the Bios
    lists no attributes); the match covering the most wins; two covering the most equally are
    ambiguous, unless they are one registry in several languages (English is taken).
    """
    bios_names = set(bios_names)
    if not candidates:
        return {"choice": None, "problem": "no member locates an attribute registry", "ambiguous": False, "how": None}
    matches = [c for c in candidates if not bios_names or coverage(c["names"], bios_names)[0] >= MATCH_SHARE * len(bios_names)]
    if not matches:
        return {"choice": None, "ambiguous": False, "how": None, "problem": "no attribute registry matches the Bios's "
                "attributes (%s)" % "; ".join(_describe(c, bios_names) for c in candidates)}
    best = max(coverage(c["names"], bios_names)[0] for c in matches)
    top = _one_language([c for c in matches if coverage(c["names"], bios_names)[0] == best])
    if len(top) > 1:
        return {"choice": None, "ambiguous": True, "how": None, "problem": "%d attribute registries match the Bios's "
                "attributes equally: %s" % (len(top), "; ".join(_describe(c, bios_names) for c in top))}
    how = "the only attribute registry the service offers that matches the Bios: " if len(matches) == 1 else \
        "the attribute registry that matches the Bios best: "
    return {"choice": top[0], "problem": None, "ambiguous": False, "how": how + _describe(top[0], bios_names)}
