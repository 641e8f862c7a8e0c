# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Next boot vs running: whether a node needs its reboot, and why (docs/roles.md section 3).

A role asks for the reboot from state, never from ``changed``: what the node will boot (GRUB's
default entry, the GRUB sources it will be made from) against what runs (``/proc/cmdline``,
``osrelease``). An interrupted run that is run again therefore asks for the same reboot. Each reason
names the thing: "GRUB will boot hugepages=128, running has hugepages=64".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline


def _text(words):
    return " ".join(words) if words else "none of them"


def cmdline_reasons(next_words, running_words, rule):
    """[reason] when the parameters ``rule`` owns differ between the next boot and the running kernel."""
    if running_words is None:
        return ["the running command line is unknown (proc/cmdline unreadable)"]
    want = _cmdline.owned_view(next_words, rule)
    have = _cmdline.owned_view(running_words, rule)
    if want == have:
        return []
    return ["GRUB will boot %s, running has %s" % (_text(want), _text(have))]


def kernel_reasons(next_release, running_release):
    if next_release is None or next_release == running_release:
        return []
    return ["GRUB will boot kernel %s, running %s" % (next_release, running_release or "unknown")]


def runtime_reasons(name, wanted, after):
    """A run-time setting that did not take (``after`` read back): the boot-time one needs the reboot."""
    if after == wanted:
        return []
    return ["%s reads %s at run time after writing %s: the boot-time setting needs the reboot" % (name, after, wanted)]
