# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Devices the washing machine changes (part 3): PCIe ACS, NIC configuration, firmware, storage.

Pure parsers of the tools' outputs and pure planners (current state + desired state -> the changes);
the modules run the tools. ``acs`` imports nothing from Ansible: the pcie role ships it with _facts
to the node, where its boot unit runs it without Ansible.
"""
