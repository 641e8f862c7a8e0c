# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ConnectX NIC tools: ``mlxconfig -e q`` (configuration with Default/Current/Next Boot),
``mlxfwmanager --query`` and ``flint q`` (firmware). Pure parsers and the configuration plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_VALUE = re.compile(r"^(?P<word>[A-Za-z_][\w.-]*)?\((?P<num>-?\d+)\)$|^(?P<bare>-?\d+|True|False)$")


def parse_mlx_value(text):
    """``True(1)`` -> 1, ``False(0)`` -> 0, ``ETH(2)`` -> 2, ``16`` -> 16; anything else -> the text."""
    match = _VALUE.match(text)
    if not match:
        return text
    if match.group("num") is not None:
        return int(match.group("num"))
    bare = match.group("bare")
    return {"True": 1, "False": 0}.get(bare, None) if bare in ("True", "False") else int(bare)


def parse_mlxconfig_query(text):
    """``mlxconfig -e -d <dev> q [NAME...]`` -> {"device": ..., "type": ..., "columns": [...], "params": {...}}.

    Sample (MFT 4.x; ``-e`` adds the Default and Current columns, a ``*`` marks a value that differs
    from the default)::

        Device #1:
        ----------

        Device type:    ConnectX7
        Name:           MCX75310AAS-NEA_Ax
        Device:         0000:19:00.0

        Configurations:                                      Default         Current         Next Boot
        *        ATS_ENABLED                                 False(0)        True(1)         True(1)
                 SRIOV_EN                                    False(0)        False(0)        False(0)

    params: {NAME: {"default": v, "current": v, "next_boot": v, "modified": bool}} with values as
    integers where the tool prints ``Word(n)``. Without ``-e`` only ``next_boot`` is there.
    """
    out = {"device": None, "type": None, "name": None, "columns": None, "params": {}, "rows": {}}
    for line in text.splitlines():
        stripped = line.strip()
        if out["columns"] is None:
            key, sep, value = stripped.partition(":")
            if sep and key in ("Device type", "Name", "Device"):
                out[{"Device type": "type", "Name": "name", "Device": "device"}[key]] = value.strip()
            elif stripped.startswith("Configurations:"):
                header = stripped[len("Configurations:"):]
                out["columns"] = [c.lower().replace(" ", "_") for c in re.split(r"\s{2,}", header.strip()) if c]
                if not out["columns"] or out["columns"][-1] != "next_boot":
                    raise ValueError("mlxconfig: unexpected Configurations header %r" % stripped)
            continue
        if not stripped or stripped.startswith("-"):
            continue
        modified = stripped.startswith("*")
        fields = stripped.lstrip("*").split()
        if len(fields) != 1 + len(out["columns"]):
            if fields and fields[0].isupper():
                raise ValueError("mlxconfig: %r has %d values, the header names %d" % (stripped, len(fields) - 1, len(out["columns"])))
            continue   # a trailing note of the tool
        if fields[0] in out["params"]:
            raise ValueError("mlxconfig: %s is listed twice (%r and %r)" % (fields[0], out["rows"][fields[0]], stripped))
        values = dict((col, parse_mlx_value(v)) for col, v in zip(out["columns"], fields[1:]))
        values["modified"] = modified
        out["params"][fields[0]] = values
        out["rows"][fields[0]] = stripped
    if out["columns"] is None:
        raise ValueError("mlxconfig: no Configurations table (%r)" % text.strip()[:80])
    return out


def check_query(query, names, device):
    """Every row of a query by ``names`` parsed: each column a number (``True(1)``, ``ETH(2)``, ``16``).
    ValueError naming the device and the row otherwise: a value that did not parse would compare as
    different and be "set" on nothing but a misread."""
    params = query.get("params") or {}
    # the wanted rows, and any other row the tool printed for a query by name (it prints only those)
    for name in sorted(set(names) | (set(params) if names else set())):
        param = params.get(name)
        if param is None:
            raise ValueError("%s: mlxconfig has no parameter %s (this firmware does not support it)" % (device, name))
        for column in query.get("columns") or []:
            value = param.get(column)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError("%s: mlxconfig row %r: %s value %r is not a number" % (
                    device, (query.get("rows") or {}).get(name, name), column.replace("_", " "), value))


def config_plan(query, settings):
    """What ``mlxconfig set`` must write and whether the reboot is needed.

    settings: {NAME: int}. Returns {"set": {NAME: v}, "pending": {NAME: (current, next_boot)},
    "reasons": [...]}: set = Next Boot differs from the wanted value; pending = Next Boot (after the
    set) differs from Current, so the value takes effect only at the next boot. Needs ``-e`` output
    (Current column) to know pending; without it every wanted value counts as pending.
    """
    device = query.get("device") or "?"
    out = {"set": {}, "pending": {}, "reasons": []}
    for name, want in sorted(settings.items()):
        param = query["params"].get(name)
        if param is None:
            raise ValueError("%s: mlxconfig has no parameter %s (this firmware does not support it)" % (device, name))
        if param.get("next_boot") != want:
            out["set"][name] = want
        current = param.get("current")
        if current != want:
            out["pending"][name] = (current, want)
            out["reasons"].append("NIC %s %s: Next Boot %s, Current %s" % (device, name, want, "unknown" if current is None else current))
    return out


def parse_mlxfwmanager_query(text):
    """``mlxfwmanager --query`` -> [{"pci", "type", "part_number", "psid", "fw", "fw_available", "status"}].

    Sample::

        Device #1:
        ----------

          Device Type:      ConnectX7
          Part Number:      MCX75310AAS-NEA_Ax
          PSID:             MT_0000000838
          PCI Device Name:  0000:19:00.0
          Versions:         Current        Available
             FW             28.39.1002     N/A
             PXE            3.7.0201       N/A
          Status:           No matching image found
    """
    devices, current, in_versions = [], None, False
    keys = {"Device Type": "type", "Part Number": "part_number", "PSID": "psid", "PCI Device Name": "pci",
            "Status": "status", "Description": "description"}
    for line in text.splitlines():
        stripped = line.strip()
        if re.match(r"^Device #\d+:$", stripped):
            current = {"pci": None, "type": None, "part_number": None, "psid": None, "fw": None,
                       "fw_available": None, "status": None, "description": None}
            devices.append(current)
            in_versions = False
            continue
        if current is None or not stripped:
            continue
        key, sep, value = stripped.partition(":")
        if sep and key in keys:
            current[keys[key]] = value.strip()
            in_versions = False
        elif sep and key == "Versions":
            in_versions = True
        elif in_versions:
            fields = stripped.split()
            if fields and fields[0] == "FW" and len(fields) >= 2:
                current["fw"] = fields[1]
                current["fw_available"] = None if len(fields) < 3 or fields[2] == "N/A" else fields[2]
    for dev in devices:
        if not dev["fw"] or not dev["psid"]:
            raise ValueError("mlxfwmanager: device %s without FW version or PSID" % (dev["pci"] or "?"))
    return devices


def parse_flint_query(text):
    """``flint -d <dev> q`` or ``flint -i <image> q`` -> {"fw", "fw_running", "psid", "image_type", "product_version"}.

    Sample (a burnt image waiting for the reset shows the running version on its own line)::

        Image type:            FS4
        FW Version:            28.40.1000
        FW Version(Running):   28.39.1002
        FW Release Date:       30.11.2023
        Product Version:       28.40.1000
        PSID:                  MT_0000000838

    fw_running is ``fw`` when the tool prints no Running line (nothing pending).
    """
    out = {"fw": None, "fw_running": None, "psid": None, "image_type": None, "product_version": None}
    keys = {"FW Version": "fw", "FW Version(Running)": "fw_running", "PSID": "psid", "Image type": "image_type",
            "Product Version": "product_version"}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in keys:
            out[keys[key.strip()]] = value.strip()
    if not out["fw"] or not out["psid"]:
        raise ValueError("flint query: no FW Version or PSID line (%r)" % text.strip()[:80])
    if out["fw_running"] is None:
        out["fw_running"] = out["fw"]
    return out
