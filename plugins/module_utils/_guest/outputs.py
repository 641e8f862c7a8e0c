# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The three renderings of a plan, by format name (what the guest_plan module returns per guest)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import cloud_hypervisor, libvirt, qemu

FORMATS = ("qemu", "libvirt", "cloud_hypervisor")


def render(plan, formats=FORMATS, devices="vfio", memory="hugepages", cpu_model="host", kernel=None,
           initramfs=None, cmdline=None):
    """{"name", "plan", and per format asked: qemu_args + qemu_pin_script, libvirt_xml,
    vm_config + cloud_hypervisor_args}."""
    out = {"name": plan["name"], "plan": plan}
    if "qemu" in formats:
        out["qemu_args"] = qemu.qemu_args(plan, devices=devices, memory=memory, cpu_model=cpu_model)
        out["qemu_pin_script"] = qemu.pin_script(plan)
    if "libvirt" in formats:
        out["libvirt_xml"] = libvirt.domain_xml(plan, devices=devices, memory=memory, cpu_model=cpu_model,
                                                kernel=kernel, initrd=initramfs, cmdline=cmdline)
    if "cloud_hypervisor" in formats:
        payload = {"kernel": kernel, "initramfs": initramfs, "cmdline": cmdline}
        out["vm_config"] = cloud_hypervisor.vm_config(plan, devices=devices, memory=memory, **payload)
        out["cloud_hypervisor_args"] = cloud_hypervisor.cli_args(plan, devices=devices, memory=memory, **payload)
    return out
