# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options shared by redfish_bios and redfish_power.
    DOCUMENTATION = r'''
options:
  baseurl:
    description:
      - Base URL of the BMC, for example C(https://10.0.0.5) or C(https://bmc01.example.net:8443).
      - Everything else is found by following links from C(/redfish/v1).
      - A redirect is followed only to the same scheme, host and port (at most 5 times); a redirect
        or a link to anywhere else (C(http://) from C(https://), another host or port) fails the task
        naming both URLs, and no credentials are sent there.
    type: str
    required: true
  username:
    description: BMC account name.
    type: str
    required: true
  password:
    description:
      - BMC account password. Never logged, never part of an error message.
    type: str
    required: true
  validate_certs:
    description:
      - Verify the BMC's TLS certificate. BMCs often carry self-signed certificates; prefer giving
        their CA in O(ca_path). Setting this to V(false) is an explicit opt-out.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file with the CA certificate(s) that signed the BMC certificate.
      - Checked before connecting; a missing file, a folder or a file without a PEM certificate
        fails the task naming the path.
    type: path
  timeout:
    description:
      - Seconds to wait for each HTTP answer (1 to 3600). A BMC that accepts the connection and
        never answers fails the request after this time (each retry waits again).
    type: int
    default: 30
  retries:
    description:
      - How many times a request is retried after a timeout, a connection error or an HTTP 5xx
        answer (503 included), with exponential backoff (0.5 s, 1 s, 2 s ... at most 16 s; a
        C(Retry-After) header is honoured up to that bound). 4xx answers are never retried.
      - 0 to 10.
    type: int
    default: 3
  auth:
    description:
      - V(basic) sends HTTP basic authentication with every request.
      - V(session) opens a Redfish session (C(Links.Sessions) of the service root), uses its
        C(X-Auth-Token) and deletes the session at the end.
    type: str
    choices: [basic, session]
    default: basic
  system_id:
    description:
      - C(Id) (or C(@odata.id)) of the ComputerSystem to manage. Needed only when several systems
        can do the job (a C(Bios) link for M(gpufleet.provision.redfish_bios), a reset action for
        M(gpufleet.provision.redfish_power)). A DGX lists its HGX baseboard as a second system, and the
        one with a Bios is chosen. The task fails and lists them when it is needed and missing.
    type: str
'''
