# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The hardware root option shared by every module that reads host state.
    DOCUMENTATION = r"""
options:
  root:
    description:
      - Root path under which sysfs, procfs and C(etc/os-release) are read.
      - C(/) on a live host; a captured tree in tests; the rendered hardware view of a lab twin.
      - Playbooks pass the inventory variable C(gpufleet_hardware_root), which real nodes never set.
    type: path
    default: /
"""

    # attributes: read-only, so check mode and diff mode are fully supported.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: Reads only; check mode returns exactly what a normal run returns.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
  idempotent:
    support: full
    description: Never changes anything; always C(changed=false).
"""
