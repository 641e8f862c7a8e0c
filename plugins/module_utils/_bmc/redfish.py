# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small Redfish HTTP client for the gpufleet modules (private API, may change without notice).

Why not community.general's redfish_utils: it returns ``{"ret": False, "msg": ...}`` dicts and
builds vendor URLs by hand. Here every failure is one exception type, RedfishError, whose message
names the BMC and the cause, and every resource is reached by following links from the service root.

BMCs are slow and flaky: timeouts, connection resets and 5xx are retried with exponential backoff
(bounded, honouring a bounded Retry-After); 4xx never are, and a POST that timed out is not sent
again (the reset may have happened). The password is never part of a message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import ssl
import time

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import urlsplit
from ansible.module_utils.urls import Request

SERVICE_ROOT = "/redfish/v1"
MAX_BACKOFF = 16.0


class RedfishError(Exception):
    """Any failure talking to a BMC. ``status`` is the HTTP status when there was an answer."""

    def __init__(self, message, status=None):
        super(RedfishError, self).__init__(message)
        self.status = status


def redfish_messages(body):
    """The human messages of a Redfish error body.

    Sample (DMTF Base registry):
        {"error": {"code": "Base.1.12.PropertyUnknown", "message": "...",
                   "@Message.ExtendedInfo": [{"MessageId": "...", "Message": "The property Foo is ..."}]}}
    """
    if not isinstance(body, dict):
        return []
    err = body.get("error", body)
    out = []
    if not isinstance(err, dict):
        return out
    for info in err.get("@Message.ExtendedInfo") or []:
        if isinstance(info, dict) and info.get("Message"):
            out.append("%s: %s" % (info.get("MessageId", "?"), info["Message"]))
    if not out and err.get("message"):
        out.append("%s: %s" % (err.get("code", "?"), err["message"]))
    return out


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


class RedfishClient:
    """One BMC. ``name`` (the base URL) prefixes every error message."""

    def __init__(self, baseurl, username, password, validate_certs=True, ca_path=None, timeout=10,
                 retries=3, auth="basic", backoff=0.5, sleep=time.sleep):
        if not baseurl or "://" not in baseurl:
            raise RedfishError("BMC %r: baseurl must look like https://<address>[:port]" % (baseurl,))
        parts = urlsplit(baseurl)
        if parts.username or parts.password:
            raise RedfishError("BMC %s://%s: put credentials in username/password, not in baseurl" % (
                parts.scheme, parts.hostname))
        self.base = baseurl.rstrip("/")
        self.name = self.base
        self.username = username
        self._password = password
        self.auth = auth
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.sleep = sleep
        self.validate_certs = validate_certs
        self.ca_path = ca_path
        self._token = None
        self._session_uri = None
        self.requests = 0

    # -- plumbing ------------------------------------------------------------------------------
    def _url(self, path):
        if path.startswith("http://") or path.startswith("https://"):
            return path
        return self.base + path

    def _open(self, method, path, body, use_auth, extra_headers=None):
        headers = {"Accept": "application/json", "OData-Version": "4.0"}
        headers.update(extra_headers or {})
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        kwargs = dict(headers=headers, timeout=self.timeout, validate_certs=self.validate_certs,
                      follow_redirects="all")
        if self.ca_path:
            kwargs["ca_path"] = self.ca_path
        if use_auth and self._token:
            headers["X-Auth-Token"] = self._token
        elif use_auth:
            kwargs.update(url_username=self.username, url_password=self._password, force_basic_auth=True)
        self.requests += 1
        return Request().open(method, self._url(path), data=data, **kwargs)

    def request(self, method, path, body=None, use_auth=True, ok=(200, 201, 202, 204), headers=None, retries=None):
        """Send one request with retries; return Response or raise RedfishError."""
        attempts = (self.retries if retries is None else retries) + 1
        last = None
        tried = 0
        for attempt in range(attempts):
            tried = attempt + 1
            retry_after = None
            try:
                resp = self._open(method, path, body, use_auth, headers)
                raw = resp.read()
                status = resp.getcode()
                headers = dict(resp.headers.items())
            except HTTPError as exc:
                status = exc.code
                headers = dict(exc.headers.items()) if exc.headers else {}
                try:
                    raw = exc.read()
                except Exception:  # pylint: disable=broad-except
                    raw = b""
                if status >= 500:
                    last = "HTTP %d %s" % (status, exc.reason)
                    retry_after = headers.get("Retry-After") or headers.get("retry-after")
                    self._backoff(attempt, attempts, retry_after)
                    continue
                raise self._http_error(method, path, status, exc.reason, raw)
            except (ssl.SSLError, ssl.CertificateError) as exc:
                raise self._tls_error(exc)
            except URLError as exc:
                reason = exc.reason
                if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
                    raise self._tls_error(reason)
                if isinstance(reason, (socket.timeout, TimeoutError)):
                    last = "no answer within %ss (timed out)" % self.timeout
                    if method == "POST":
                        break  # a reset or job POST may have been processed: never send it twice
                else:
                    last = "cannot connect (%s)" % (reason,)
                    if method == "POST" and isinstance(reason, ConnectionResetError):
                        break
                self._backoff(attempt, attempts, None)
                continue
            except (socket.timeout, TimeoutError) as exc:
                last = "no answer within %ss (%s)" % (self.timeout, exc or "timed out")
                if method == "POST":
                    break  # a reset or job POST may have been processed: never send it twice
                self._backoff(attempt, attempts, None)
                continue
            except (ConnectionError, OSError) as exc:
                last = "connection failed (%s)" % (exc,)
                if method == "POST" and not isinstance(exc, ConnectionRefusedError):
                    break
                self._backoff(attempt, attempts, None)
                continue
            if status not in ok:
                raise self._http_error(method, path, status, "", raw)
            return Response(status, headers, self._decode(method, path, raw))
        raise RedfishError("BMC %s: %s %s failed after %d attempt(s): %s" % (
            self.name, method, path, tried, last))

    def _backoff(self, attempt, attempts, retry_after):
        if attempt + 1 >= attempts:
            return
        delay = min(self.backoff * (2 ** attempt), MAX_BACKOFF)
        if retry_after:
            try:
                delay = min(max(delay, float(retry_after)), MAX_BACKOFF)
            except ValueError:
                pass
        self.sleep(delay)

    def _decode(self, method, path, raw):
        if not raw or not raw.strip():
            return {}
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise RedfishError("BMC %s: %s %s answered something that is not JSON: %r" % (
                self.name, method, path, raw[:120]))

    def _http_error(self, method, path, status, reason, raw):
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except (ValueError, UnicodeDecodeError):
            body = {}
        if status == 401:
            return RedfishError("BMC %s: 401 Unauthorized for user %r on %s %s: wrong username or password (%s auth)" % (
                self.name, self.username, method, path, self.auth), status)
        if status == 403:
            return RedfishError("BMC %s: 403 Forbidden for user %r on %s %s: the account lacks the privilege" % (
                self.name, self.username, method, path), status)
        details = "; ".join(redfish_messages(body)) or (reason or "no details")
        return RedfishError("BMC %s: %s %s answered HTTP %d: %s" % (self.name, method, path, status, details), status)

    def _tls_error(self, exc):
        return RedfishError(
            "BMC %s: TLS failed (%s). Give the BMC's CA certificate in ca_path, or set validate_certs: false "
            "to opt out of certificate checks explicitly" % (self.name, exc))

    # -- verbs ---------------------------------------------------------------------------------
    def get(self, path):
        return self.request("GET", path).body

    def get_with_etag(self, path):
        """(body, ETag) of a resource: the ETag header, else the body's @odata.etag, else None."""
        resp = self.request("GET", path)
        return resp.body, resp.header("ETag") or (resp.body or {}).get("@odata.etag")

    def get_public(self, url):
        """GET an absolute URL outside the BMC (a registry's PublicationUri): no credentials are
        sent, TLS is verified as for the BMC, one attempt only (air-gapped sites never answer)."""
        return self.request("GET", url, use_auth=False, retries=0).body

    def patch(self, path, body, headers=None):
        return self.request("PATCH", path, body, headers=headers)

    def post(self, path, body):
        return self.request("POST", path, body)

    # -- sessions ------------------------------------------------------------------------------
    def login(self):
        """Open a Redfish session when auth=session (Links.Sessions of the service root)."""
        if self.auth != "session" or self._token:
            return
        root = self.request("GET", SERVICE_ROOT, use_auth=False).body
        sessions = ((root.get("Links") or {}).get("Sessions") or {}).get("@odata.id")
        if not sessions:
            raise RedfishError("BMC %s: the service root has no Links.Sessions; use auth: basic" % self.name)
        resp = self.request("POST", sessions, {"UserName": self.username, "Password": self._password}, use_auth=False)
        token = resp.header("X-Auth-Token")
        if not token:
            raise RedfishError("BMC %s: POST %s gave no X-Auth-Token" % (self.name, sessions))
        self._token = token
        self._session_uri = resp.header("Location") or resp.body.get("@odata.id")

    def logout(self):
        if self._token and self._session_uri:
            try:
                self.request("DELETE", self._session_uri)
            except RedfishError:
                pass  # the session times out on the BMC anyway
        self._token = None
        self._session_uri = None

    # -- discovery -----------------------------------------------------------------------------
    def find_system(self, system_id=None, usable=None, purpose=None):
        """Return (path, resource) of the system: the named one, or the only one (among those
        ``usable(resource)`` accepts, when several: a DGX lists its HGX baseboard as a second system)."""
        self.login()
        root = self.get(SERVICE_ROOT)
        systems_path = (root.get("Systems") or {}).get("@odata.id")
        if not systems_path:
            raise RedfishError("BMC %s: the service root links no Systems collection" % self.name)
        members = [m.get("@odata.id") for m in self.get(systems_path).get("Members") or [] if m.get("@odata.id")]
        return select_system(self.name, members, system_id, self.get, usable, purpose)


def select_system(name, members, system_id, get, usable=None, purpose=None):
    """Pick the system: by Id or path when named; the single member otherwise; among several, the
    only one ``usable(resource)`` accepts (``purpose`` names what it must have, for the message)."""
    if system_id:
        for path in members:
            if path.rstrip("/").rsplit("/", 1)[-1] == system_id or path.rstrip("/") == system_id.rstrip("/"):
                return path, get(path)
        raise RedfishError("BMC %s: no system %r (systems: %s)" % (name, system_id, ", ".join(members) or "none"))
    if len(members) == 1:
        return members[0], get(members[0])
    if not members:
        raise RedfishError("BMC %s: the Systems collection is empty" % name)
    if usable is not None:
        found = [(path, doc) for path, doc in ((p, get(p)) for p in members) if usable(doc)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise RedfishError("BMC %s: none of the %d systems (%s) has %s" % (
                name, len(members), ", ".join(members), purpose or "what this module needs"))
        members = [path for path, _doc in found]
    raise RedfishError("BMC %s: %d systems (%s)%s: name one with system_id" % (
        name, len(members), ", ".join(members), (" have %s" % purpose) if usable is not None and purpose else ""))


def link(resource, *keys):
    """Follow nested keys to an @odata.id, or None. link(system, "Bios") -> "/redfish/v1/Systems/1/Bios"."""
    node = resource
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    if isinstance(node, list):
        node = node[0] if node else None
    if isinstance(node, dict):
        return node.get("@odata.id")
    return None


def connection_spec():
    """Argument spec of the connection options (doc fragment gpufleet.provision.redfish)."""
    return dict(
        baseurl=dict(type="str", required=True),
        username=dict(type="str", required=True),
        password=dict(type="str", required=True, no_log=True),
        validate_certs=dict(type="bool", default=True),
        ca_path=dict(type="path"),
        timeout=dict(type="int", default=30),
        retries=dict(type="int", default=3),
        auth=dict(type="str", choices=["basic", "session"], default="basic"),
        system_id=dict(type="str"),
    )


def client_from(params):
    return RedfishClient(params["baseurl"], params["username"], params["password"],
                         validate_certs=params["validate_certs"], ca_path=params["ca_path"],
                         timeout=params["timeout"], retries=params["retries"], auth=params["auth"])


def run_module(module, work):
    """The body of every Redfish module: a client from the module's connection options, ``work(client)``
    for the result, a logout whatever happens, and one fail_json naming the BMC and the cause."""
    try:
        client = client_from(module.params)
        try:
            result = work(client)
        finally:
            client.logout()
    except RedfishError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)
