# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package versions and package-manager outputs: pure helpers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def upstream_version(version):
    """Debian ``1:550.90.07-0ubuntu1`` -> "550.90.07"; RPM versions (no revision) unchanged."""
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def parse_versionlock(text):
    """versionlock list -> package names. dnf: ``nvidia-driver-3:550.90.07-1.el9.*`` (name-[epoch:]
    version-release); yum (RHEL 7) puts the epoch first: ``0:kernel-3.10.0-1160.el7.*``. The release
    may be a glob. Other lines (metadata notes) are skipped."""
    names = set()
    for line in text.splitlines():
        line = re.sub(r"^\d+:", "", line.strip())
        parts = line.rsplit("-", 2)
        if len(parts) == 3 and parts[0] and re.match(r"^(\d+:)?[0-9][\w.+~]*$", parts[1]) and " " not in line:
            names.add(parts[0])
    return names
