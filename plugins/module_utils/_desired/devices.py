# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state of PCIe ACS/ATS, storage and firmware (see _desired/__init__.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import area  # noqa: F401  pylint: disable=unused-import
