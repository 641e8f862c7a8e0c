# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which active probes run on the node, and how: pure (no Ansible, no I/O).

A probe runs only when the profile enables it (``probes.<name>.enabled``) and its output was not
recorded. It runs the command the caller gives for it, or else the shipped probe script
(roles/validate/files/gpufleet_probe.py) with the probe's arguments; the gdr probe's arguments are
the node's GPU-NIC pairs from the fact tree. validate_node hands the result to the lazy outputs
(collect.Outputs): a probe then runs the first time a check reads its output, once, under its own
timeout, and a probe that fails or times out leaves its checks without data, the cause named.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Output name of each active probe (what the checks of checks/probes.py read).
OUTPUTS = {
    "nccl": "nccl_debug",
    "h2d": "h2d_bandwidth",
    "p2p": "p2p_bandwidth",
    "gdr": "gdr_bandwidth",
    "dcgm": "dcgm_diag",
}
SCRIPT_NAME = "gpufleet_probe.py"


def enabled(profile):
    """The probes the profile enables, sorted."""
    probes = profile.get("probes") if isinstance(profile, dict) else None
    if not isinstance(probes, dict):
        return []
    return sorted(name for name, conf in probes.items() if isinstance(conf, dict) and conf.get("enabled"))


def script_args(name, facts, dcgm_level):
    """The shipped script's arguments for one probe."""
    if name == "gdr":
        pairs = [p for p in (facts or {}).get("pairs") or [] if p.get("nic")]
        return ["gdr"] + ["--pair=%s=%s" % (p["nic"], p["gpu"]) for p in pairs]
    if name == "dcgm":
        return ["dcgm", "--level", str(dcgm_level)]
    return [name]


def _wanted(profile, commands, recorded):
    """(name, output, argv) of every enabled probe whose output is not in ``recorded``; an empty
    argv: the probe runs the shipped script."""
    commands = commands if isinstance(commands, dict) else {}
    recorded = recorded if isinstance(recorded, dict) else {}
    for name in enabled(profile):
        output = OUTPUTS.get(name)
        if output is not None and output not in recorded:
            yield name, output, list(commands.get(name) or [])


def wants_script(profile, commands, recorded):
    """Whether an enabled probe would run the shipped script (the action sends it only then)."""
    return any(not argv for _name, _output, argv in _wanted(profile, commands, recorded))


def plan(profile, commands, facts, script_path, python, dcgm_level, timeout, recorded=None):
    """Output name -> (argv, timeout, label) for every enabled probe whose output is not in
    ``recorded``. ``commands``: probe name -> argv (an empty one runs the script); ``script_path``:
    where the script is on the node (None: not sent, such a probe is not planned and its checks
    say so through the missing output). ``label`` names the probe in a check's reason."""
    runs = {}
    for name, output, argv in _wanted(profile, commands, recorded):
        if argv:
            runs[output] = (argv, timeout, " ".join(argv))
        elif script_path:
            args = script_args(name, facts, dcgm_level)
            runs[output] = ([python, script_path] + args, timeout, "%s %s" % (SCRIPT_NAME, name))
    return runs
