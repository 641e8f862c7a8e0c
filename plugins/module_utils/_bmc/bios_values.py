# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The portable BIOS settings and their values (the profile's ``bios`` keys), apart from the
resolver: the profile schema reads them in every forked worker that renders the profile lookup,
and importing bios_resolve there for three tuples cost each worker 8 ms."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PORTABLE_SETTINGS = ("snc", "hyperthreading", "vtx", "vtd", "sriov", "acs", "power_profile")
SNC_VALUES = ("off", "snc2", "snc4", "nps1", "nps2", "nps4")
POWER_PROFILES = ("performance", "efficiency", "custom")
