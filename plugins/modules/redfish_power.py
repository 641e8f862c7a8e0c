#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: redfish_power
short_description: Restart (or power on/off) a server through its BMC and wait for the result
version_added: 0.1.0
description:
  - Posts C(ComputerSystem.Reset) to the target the system's C(Actions) name, with a ResetType
    the BMC allows, and polls C(PowerState) until the wanted state is reached.
  - O(state=restarted) sends C(GracefulRestart); when the system was not seen Off within
    O(force_after) seconds it sends C(ForceRestart); it returns once the system was Off and is On again.
  - Pending BIOS settings (M(gpufleet.provision.redfish_bios)) apply during this reset.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.provision.redfish
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details: Reads the power state and predicts the change without posting a reset.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
    support: partial
    details: V(on) and V(off) are idempotent; V(restarted) restarts on every run, by definition.
options:
  state:
    description: What to do.
    type: str
    choices: [restarted, "on", "off"]
    default: restarted
  graceful:
    description: Try C(GracefulRestart)/C(GracefulShutdown) first; V(false) goes straight to the forced variant.
    type: bool
    default: true
  force_after:
    description: Seconds to wait for a graceful restart or shutdown before forcing it (0 to 86400).
    type: int
    default: 300
  wait_timeout:
    description: Seconds to wait in total for the wanted power state (1 to 86400).
    type: int
    default: 900
  poll_interval:
    description: Seconds between two reads of C(PowerState) (0.1 to 3600).
    type: float
    default: 2.0
notes:
  - Every option is checked before the first request; a value out of range fails the task naming
    the option, and no reset is posted.
  - A BMC that goes Off and On again faster than O(poll_interval) is not seen Off; the module then
    sends C(ForceRestart) after O(force_after). Keep O(poll_interval) below the server's POST time.
seealso:
  - module: gpufleet.provision.redfish_bios
'''

EXAMPLES = r'''
- name: Reboot through the BMC so pending BIOS settings apply
  gpufleet.provision.redfish_power:
    baseurl: "https://{{ gpufleet_bmc_address }}"
    username: "{{ gpufleet_bmc_username }}"
    password: "{{ gpufleet_bmc_password }}"
    ca_path: /etc/gpufleet/bmc-ca.pem
    state: restarted
    force_after: 600
  delegate_to: localhost
'''

RETURN = r'''
actions:
  description: ResetTypes posted, in order.
  returned: success
  type: list
  elements: str
  sample: [GracefulRestart]
power_state:
  description: PowerState at the end.
  returned: success
  type: str
  sample: "On"
seconds:
  description: Seconds from the first reset to the wanted state.
  returned: success
  type: float
  sample: 4.1
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.power import OPTION_RANGES, can_reset, power_cycle, reset_target
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import connection_spec, run_module


def main():
    argument_spec = connection_spec()
    argument_spec.update(
        state=dict(type="str", choices=["restarted", "on", "off"], default="restarted"),
        graceful=dict(type="bool", default=True),
        force_after=dict(type="int", default=300),
        wait_timeout=dict(type="int", default=900),
        poll_interval=dict(type="float", default=2.0),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params

    def work(client):
        # A DGX lists its HGX baseboard as a second system, without a reset action: not a candidate.
        path, system = client.find_system(p["system_id"], usable=can_reset, purpose="a #ComputerSystem.Reset action")
        reset_target(client.name, system)
        if module.check_mode:
            now = system.get("PowerState")
            changed = p["state"] == "restarted" or (p["state"] == "on") != (now == "On")
            return dict(changed=changed, actions=[], power_state=now, seconds=0.0)
        return power_cycle(client, path, system, p["state"], p["graceful"], p["force_after"],
                           p["wait_timeout"], p["poll_interval"])

    run_module(module, work, ranges=OPTION_RANGES)


if __name__ == "__main__":
    main()
