#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: redfish_bios
short_description: Set BIOS attributes through a BMC's Redfish API, telling pending from current
version_added: 0.1.0
description:
  - Finds the system from C(/redfish/v1/Systems) (the only one with a C(Bios) link when there are
    several, as on a DGX), follows its C(Bios) link and the C(@Redfish.Settings.SettingsObject) link
    (C(/Bios/Settings), C(/Bios/Pending), C(/Bios/SD), C(/bios/settings)...), never building vendor URLs by hand.
  - Finds the BIOS attribute registry the way the standard says, the Bios's C(AttributeRegistry) ->
    the C(/redfish/v1/Registries) member whose Id matches (versions may differ) -> its C(Location) C(Uri)
    (C(PublicationUri) without credentials as a last resort), then the places vendors use (Dell
    C(Bios/BiosRegistry), HPE C(registrystore)).
  - When the Bios names no C(AttributeRegistry) (OpenBMC services), reads every C(/redfish/v1/Registries)
    member and the document its C(Location) C(Uri) serves on the BMC, keeps the documents that are
    C(AttributeRegistry) resources and uses the one whose attribute names cover the Bios's attributes
    (all, or at least 95%); two that match equally fail the task naming both. RV(registry_source) says
    which registry was used and how it was found.
  - With no registry at all, names are checked against the current attributes only, values are not
    checked; a warning says so and RV(unvalidated) lists the attributes concerned.
  - Desired values come as raw O(attributes) and/or portable O(settings). A portable setting is
    resolved against this BMC's own registry, by known names (hints per vendor, corrected on real
    captures) and by the registry's metadata (DisplayName, HelpText), its value by meaning (2-way or
    4-way clusters, NUMA domains per socket, enabled/disabled, inverted switches); RV(resolution) says how.
    A setting this BMC cannot express, or can express two ways, fails the task naming the candidates
    and writes nothing (O(unavailable=warn) leaves it alone with a warning instead).
  - Raw attributes work on any standard Redfish BMC whatever its Manufacturer; vendor rules (Dell
    configuration jobs) apply when the vendor is known.
  - Before any write, every name and value is checked against the registry; an unknown name or value
    fails the task, names the allowed values and writes nothing. C(ValueDisplayName)s are accepted.
    An attribute read-only under a registry C(Dependency) (Dell C(ProcCStates) while C(SysProfile) is
    not C(Custom)) gets its controlling attribute first, in the same PATCH.
  - Each desired attribute is compared with the current AND the pending values; a settings object
    that holds every attribute (Lenovo, HPE, AMI) is pending only where it differs from current.
    Already current is ok; already pending gives C(changed=false) and RV(reboot_required=true); only
    differing attributes are PATCHed, with C(If-Match) (the settings object's ETag; one retry with a
    fresh one on 412/428) and C(@Redfish.SettingsApplyTime) C(OnReset) only where the BMC lists it.
  - Dell iDRAC applies pending values only through a BIOS configuration job; the module creates it
    and fails when the job is stuck (C(Scheduled) with C(Job processing initialization failure.)).
  - O(state=verify) (after the reboot) fails when any desired attribute is not current, listing each
    one with expected and actual values.
  - The module never reboots; see M(gpufleet.provision.redfish_power) and the C(bios) role.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.provision.redfish
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details: Reads the BMC and predicts the PATCH (and the Dell job) without sending it.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: Shows each attribute written, before (pending, else current) and after.
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
    support: full
    details: A second run while the change is pending reports C(changed=false) and RV(reboot_required=true).
options:
  vendor:
    description:
      - Vendor whose known names are tried first for O(settings) and whose rules apply (Dell
        configuration job; Dell C(SysProfile=Custom) when the BMC publishes no registry).
      - V(auto) detects it from the ComputerSystem C(Manufacturer), else the registry's C(OwningEntity);
        a BMC of any other vendor is driven by its registry alone (V(generic) forces that).
    type: str
    choices: [auto, generic, ami, dell, hpe, lenovo, supermicro]
    default: auto
  unavailable:
    description:
      - What to do with a portable setting this BMC cannot express (no such attribute, no such value,
        or two equally good candidates).
      - V(fail) fails the task before anything is written, naming the candidates found.
      - V(warn) leaves that setting alone with a warning (listed in RV(unresolved)) and goes on with
        the others; the validation gate still checks the node.
    type: str
    choices: [fail, warn]
    default: fail
  attributes:
    description:
      - 'Raw BIOS attributes, vendor names and values, for example C({LogicalProc: Enabled}).'
      - Each value must be a string, a number or a boolean; anything else (null, a list, an object)
        fails the task before the first request.
    type: dict
  settings:
    description: Portable settings, resolved against this BMC's attribute registry.
    type: dict
    suboptions:
      snc:
        description:
          - Sub-NUMA clustering (Intel SNC, V(off), V(snc2), V(snc4)) or AMD NUMA nodes per socket
            (V(nps1), V(nps2), V(nps4)). An Intel value on an AMD BMC, or the reverse, is refused, not guessed.
        type: str
        choices: ["off", snc2, snc4, nps1, nps2, nps4]
      hyperthreading:
        description: Simultaneous multithreading.
        type: bool
      vtx:
        description: CPU virtualization (VT-x / AMD-V).
        type: bool
      vtd:
        description: IOMMU (VT-d / AMD-Vi).
        type: bool
      sriov:
        description: SR-IOV support.
        type: bool
      acs:
        description: PCIe Access Control Services, where the BIOS has a switch for it.
        type: bool
      power_profile:
        description: System power/performance profile.
        type: str
        choices: [performance, efficiency, custom]
  state:
    description:
      - V(present) writes what differs (pending until the next reset).
      - V(verify) writes nothing and fails unless every desired attribute is current.
    type: str
    choices: [present, verify]
    default: present
  apply_time:
    description:
      - V(OnReset) sends C(@Redfish.SettingsApplyTime) C(OnReset) when the BIOS resource lists it in
        C(SupportedApplyTimes); V(omit) never sends it.
    type: str
    choices: [OnReset, omit]
    default: OnReset
notes:
  - "Run it on the controller (C(delegate_to: localhost)): it talks to the BMC, not to the node."
  - Attribute names and values differ by vendor, platform and BIOS version. The BMC's registry is the
    authority; docs/redfish.md lists what each portable setting resolves to on real captured BMCs.
seealso:
  - module: gpufleet.provision.redfish_power
'''

EXAMPLES = r'''
- name: SNC4, hyper-threading and VT-d on, whatever the vendor (resolved on the BMC's own registry)
  gpufleet.provision.redfish_bios:
    baseurl: "https://{{ gpufleet_bmc_address }}"
    username: "{{ gpufleet_bmc_username }}"
    password: "{{ gpufleet_bmc_password }}"
    ca_path: /etc/gpufleet/bmc-ca.pem
    settings: {snc: snc4, hyperthreading: true, vtd: true}
  delegate_to: localhost
  register: bios

- name: The same on a mixed fleet, leaving alone what a BMC has no switch for (warned)
  gpufleet.provision.redfish_bios:
    baseurl: "https://{{ gpufleet_bmc_address }}"
    username: "{{ gpufleet_bmc_username }}"
    password: "{{ gpufleet_bmc_password }}"
    ca_path: /etc/gpufleet/bmc-ca.pem
    settings: {snc: snc4, hyperthreading: true, vtd: true, acs: false}
    unavailable: warn
  delegate_to: localhost

- name: Raw Dell attributes (the registry locks ProcCStates until SysProfile=Custom, added first)
  gpufleet.provision.redfish_bios:
    baseurl: https://10.0.0.5
    username: root
    password: "{{ vault_idrac_password }}"
    attributes: {ProcCStates: Enabled, SubNumaCluster: 2-Way}
  delegate_to: localhost

- name: After the reboot, every attribute must be current
  gpufleet.provision.redfish_bios:
    baseurl: https://10.0.0.5
    username: root
    password: "{{ vault_idrac_password }}"
    settings: {snc: snc4, hyperthreading: true, vtd: true}
    state: verify
  delegate_to: localhost
'''

RETURN = r'''
vendor:
  description: Vendor whose hints and rules were used, V(generic) when none.
  returned: success
  type: str
  sample: dell
system:
  description: The ComputerSystem managed.
  returned: success
  type: str
  sample: /redfish/v1/Systems/System.Embedded.1
registry:
  description: Where the BIOS attribute registry was read, null when none was found.
  returned: success
  type: str
  sample: /redfish/v1/Systems/System.Embedded.1/Bios/BiosRegistry
registry_source:
  description:
    - Which attribute registry names and values were checked against, and how it was found.
    - C(found_by) is C(Bios.AttributeRegistry) (named by the Bios resource), C(Registries scan) (the
      Bios names none; the one attribute registry of C(/redfish/v1/Registries) matching its
      attributes) or null (none found; C(how) says why).
  returned: success
  type: dict
  sample: {id: BiosAttributeRegistry, uri: /redfish/v1/Registries/BiosAttributeRegistry/BiosAttributeRegistry,
           found_by: Registries scan, how: "the only attribute registry the service offers that matches the Bios: ..."}
unvalidated:
  description: Desired attributes whose values could not be checked because no registry was found (empty otherwise).
  returned: success
  type: list
  elements: str
  sample: []
resolution:
  description: For each portable setting, the attribute and value chosen on this BMC and why, or the problem.
  returned: success
  type: list
  elements: dict
  sample: [{setting: snc, wanted: snc2, attribute: SubNumaCluster, value: 2-Way, candidates: [SubNumaCluster],
            problem: null, how: "SubNumaCluster (known dell name, DisplayName 'Sub NUMA Cluster', name); '2-Way' is 2 clusters per socket"}]
unresolved:
  description: Portable settings left alone with O(unavailable=warn).
  returned: success
  type: list
  elements: str
  sample: [acs]
dependencies:
  description: Controlling attributes added to unlock desired ones, with the reason.
  returned: success
  type: dict
  sample: {SysProfile: "unlocks ProcCStates (registry: read-only while SysProfile is not Custom)"}
current:
  description: Current BIOS attributes as read before any write.
  returned: success
  type: dict
  sample: {LogicalProc: Enabled, SubNumaCluster: Disabled}
pending:
  description: Pending BIOS attributes after the task (what the next reset applies).
  returned: success
  type: dict
  sample: {SubNumaCluster: 2-Way}
desired:
  description: Raw attributes the task wants, dependencies first (Dell C(SysProfile)).
  returned: success
  type: dict
  sample: {SubNumaCluster: 2-Way, LogicalProc: Enabled}
changed_attributes:
  description: Attributes PATCHed by this run (or that would be, in check mode).
  returned: success
  type: dict
  sample: {SubNumaCluster: 2-Way}
already_pending:
  description: Desired attributes already pending from an earlier run, not written again.
  returned: success
  type: list
  elements: str
  sample: [SubNumaCluster]
reboot_required:
  description: A reset is needed for the desired values to become current.
  returned: success
  type: bool
  sample: true
diff:
  description:
    - Attributes this run writes; before is the value the next reset would have applied
      (pending if any, else current), after the desired one.
  returned: success
  type: dict
  sample: {before: {SubNumaCluster: Disabled}, after: {SubNumaCluster: 2-Way}}
job:
  description: Dell BIOS configuration job URI created or found scheduled, else null.
  returned: success
  type: str
  sample: /redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_878623579002
failures:
  description: With O(state=verify), each attribute not current after the reboot.
  returned: failure
  type: list
  elements: dict
  sample: [{attribute: SubNumaCluster, expected: 2-Way, actual: Disabled, pending: 2-Way}]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios as _bios
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import connection_spec, run_module

SETTINGS_SPEC = dict(
    snc=dict(type="str", choices=list(_bios.SNC_VALUES)),
    hyperthreading=dict(type="bool"),
    vtx=dict(type="bool"),
    vtd=dict(type="bool"),
    sriov=dict(type="bool"),
    acs=dict(type="bool"),
    power_profile=dict(type="str", choices=list(_bios.POWER_PROFILES)),
)


def desired_from(module, bios, params):
    """Raw attributes wanted: portable settings resolved on this BMC's registry, plus raw ones."""
    settings = dict((k, v) for k, v in (params["settings"] or {}).items() if v is not None)
    translated, resolutions, unresolved = _bios.resolve_settings(settings, bios.registry, bios.vendor, bios.current)
    if unresolved and params["unavailable"] == "fail":
        raise _bios.BiosError(_bios.format_unresolved(bios.client.name, unresolved))
    for res in unresolved:
        module.warn("BMC %s: setting %s=%s left alone: %s" % (bios.client.name, res["setting"], res["wanted"], res["problem"]))
    desired = _bios.merge_desired(_bios.coerce(params["attributes"] or {}, bios.registry), translated)
    if not desired and not unresolved:
        raise _bios.BiosError("nothing to do: give attributes and/or settings")
    desired, reasons = _bios.add_dependencies(bios.vendor, desired, bios.registry, bios.dependencies,
                                              bios.current, bios.pending)
    return _bios.coerce(desired, bios.registry), resolutions, unresolved, reasons


def run(module, client):
    params = module.params
    bios = _bios.Bios(client, params["system_id"], params["vendor"])
    if params["apply_time"] == "omit":
        bios.apply_times = []
    registry = bios.load_registry()
    if not registry:
        module.warn("BMC %s: %s: names checked against the current attributes only, values unchecked" % (
            client.name, bios.registry_note))
    desired, resolutions, unresolved, reasons = desired_from(module, bios, params)
    _bios.validate(client.name, desired, registry, bios.current, bios.dependencies, bios.pending,
                   label=_bios.registry_label(bios.registry_source))

    result = dict(changed=False, vendor=bios.vendor_name, system=bios.system_path, current=bios.current,
                  desired=desired, job=None, resolution=resolutions, unresolved=[r["setting"] for r in unresolved],
                  dependencies=reasons, registry=bios.registry_uri, registry_source=bios.registry_source,
                  unvalidated=[] if registry else sorted(desired))
    # A scheduled (or stuck) Dell BIOS job only exists while values are pending: skip the Jobs
    # walk (one GET per job on iDRAC) in the steady state.
    job = bios.bios_job() if bios.needs_job() and bios.pending else None
    problem = _bios.job_problem(job)

    if params["state"] == "verify":
        failures = _bios.verify(desired, bios.current, bios.pending)
        result.update(pending=bios.pending, reboot_required=bool(failures), failures=failures,
                      changed_attributes={}, already_pending=[], diff=dict(before={}, after={}),
                      job=job.get("@odata.id") if job else None)
        if failures:
            module.fail_json(msg=_bios.format_failures(client.name, failures, problem), **result)
        return result

    if problem:
        raise _bios.BiosError("BMC %s: %s" % (client.name, problem))
    p = _bios.plan(desired, bios.current, bios.pending)
    to_write = p["to_write"]
    pending_after = dict(bios.pending)
    pending_after.update(to_write)
    job_uri = job.get("@odata.id") if job else None
    if to_write and job_uri:
        raise _bios.BiosError("BMC %s: BIOS configuration job %s is already scheduled with other pending values (%s); "
                              "reboot to apply it (or delete it) before changing %s" % (
                                  client.name, job.get("Id"), ", ".join(sorted(bios.pending)) or "none",
                                  ", ".join(sorted(to_write))))
    # Dell: pending values without a scheduled job are never applied by a reboot.
    make_job = bios.needs_job() and not job_uri and bool(to_write or p["already_pending"])
    changed = bool(to_write) or make_job
    if changed and not module.check_mode:
        if to_write:
            job_uri = bios.write(to_write)
        if make_job and not job_uri:
            job_uri = bios.create_job()
        pending_after = bios.read_settings_object()
    result.update(changed=changed, pending=pending_after, changed_attributes=to_write,
                  already_pending=p["already_pending"], reboot_required=p["reboot_required"],
                  diff=p["diff"], job=job_uri)
    return result


def main():
    argument_spec = connection_spec()
    argument_spec.update(
        vendor=dict(type="str", choices=["auto", _bios.GENERIC] + list(_bios.VENDORS), default="auto"),
        unavailable=dict(type="str", choices=["fail", "warn"], default="fail"),
        attributes=dict(type="dict"),
        settings=dict(type="dict", options=SETTINGS_SPEC),
        state=dict(type="str", choices=["present", "verify"], default="present"),
        apply_time=dict(type="str", choices=["OnReset", "omit"], default="OnReset"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_one_of=[("attributes", "settings")])
    run_module(module, lambda client: run(module, client),
               check=lambda params: _bios.check_input(params["attributes"], params["settings"]))


if __name__ == "__main__":
    main()
