# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power through Redfish: ComputerSystem.Reset found in the system's own Actions, and the wait for
the PowerState that follows (redfish_power, and the reboot role through it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import RedfishError, dig, expect, link

RESET = ("Actions", "#ComputerSystem.Reset")
# redfish_power's timing options (lowest, highest, unit), checked before the reset is posted: a
# negative or zero wait would fail after the reset, a zero poll interval would hammer the BMC.
OPTION_RANGES = {
    "force_after": (0, 86400, "seconds"),
    "wait_timeout": (1, 86400, "seconds"),
    "poll_interval": (0.1, 3600, "seconds"),
}


def can_reset(system):
    """Whether a system offers ComputerSystem.Reset (a DGX's HGX baseboard does not)."""
    return isinstance(dig(system, *(RESET + ("target",))), str)


def reset_target(name, system):
    """(target URI, allowed ResetTypes or None) of ComputerSystem.Reset, from the system's Actions."""
    where = link(system) or "the system"
    target = expect(name, where, system, RESET + ("target",), str)
    if not target:
        raise RedfishError("BMC %s: system %s offers no #ComputerSystem.Reset action" % (name, where))
    allowed = expect(name, where, system, RESET + ("ResetType@Redfish.AllowableValues",), list)
    return target, None if allowed is None else [kind for kind in allowed if isinstance(kind, str)]


def power_cycle(client, system_path, system, state="restarted", graceful=True, force_after=300,
                wait_timeout=900, poll_interval=2.0, clock=time.monotonic):
    """Bring the system to ``state`` (restarted|on|off) and wait for it; returns a dict of what happened.

    restarted: GracefulRestart, then ForceRestart if the system was not seen Off within
    ``force_after`` seconds; done once it was seen Off and is On again. A BMC whose restart is
    shorter than ``poll_interval`` may not be seen Off: then ForceRestart follows (documented).
    """
    target, allowed = reset_target(client.name, system)

    def allowed_type(*candidates):
        for cand in candidates:
            if allowed is None or cand in allowed:
                return cand
        raise RedfishError("BMC %s: none of %s is an allowed ResetType (allowed: %s)" % (
            client.name, "/".join(candidates), ", ".join(allowed)))

    def power():
        return client.get(system_path).get("PowerState")

    actions = []
    start = clock()
    if state == "on":
        if power() == "On":
            return dict(changed=False, actions=actions, power_state="On", seconds=0.0)
        kind = allowed_type("On", "ForceOn")
        client.post(target, {"ResetType": kind})
        actions.append(kind)
        return _wait_for(client, power, "On", start, wait_timeout, poll_interval, clock, actions)
    if state == "off":
        if power() == "Off":
            return dict(changed=False, actions=actions, power_state="Off", seconds=0.0)
        kind = allowed_type("GracefulShutdown", "ForceOff") if graceful else allowed_type("ForceOff")
        client.post(target, {"ResetType": kind})
        actions.append(kind)
        if kind == "GracefulShutdown":
            try:
                return _wait_for(client, power, "Off", start, force_after, poll_interval, clock, actions)
            except RedfishError:
                client.post(target, {"ResetType": allowed_type("ForceOff")})
                actions.append("ForceOff")
        return _wait_for(client, power, "Off", start, wait_timeout, poll_interval, clock, actions)
    if power() == "Off":
        kind = allowed_type("On", "ForceOn")
        client.post(target, {"ResetType": kind})
        actions.append(kind)
        return _wait_for(client, power, "On", start, wait_timeout, poll_interval, clock, actions)
    kind = allowed_type("GracefulRestart", "ForceRestart") if graceful else allowed_type("ForceRestart")
    client.post(target, {"ResetType": kind})
    actions.append(kind)
    seen_off = False
    forced = kind != "GracefulRestart"
    deadline = start + wait_timeout
    while True:
        now = clock()
        state_now = power()
        if state_now != "On":
            seen_off = True
        elif seen_off:
            return dict(changed=True, actions=actions, power_state="On", seconds=round(clock() - start, 1))
        if not forced and not seen_off and now - start >= force_after:
            client.post(target, {"ResetType": allowed_type("ForceRestart")})
            actions.append("ForceRestart")
            forced = True
        if now >= deadline:
            raise RedfishError("BMC %s: system %s not back On within %ss after %s (last PowerState %s)" % (
                client.name, system_path, wait_timeout, " then ".join(actions), state_now))
        client.sleep(poll_interval)


def _wait_for(client, power, wanted, start, timeout, poll_interval, clock, actions):
    while True:
        now_state = power()
        if now_state == wanted:
            return dict(changed=True, actions=actions, power_state=wanted, seconds=round(clock() - start, 1))
        if clock() - start >= timeout:
            raise RedfishError("BMC %s: PowerState still %s %ss after %s (wanted %s)" % (
                client.name, now_state, timeout, " then ".join(actions), wanted))
        client.sleep(poll_interval)
