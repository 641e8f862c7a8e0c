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

Hostile BMCs (or men in the middle) are expected: a redirect is followed only to the same scheme,
host and port (credentials never go anywhere else), a body is read up to MAX_BODY bytes, every GET
must answer a JSON object, and the shapes the flow relies on (``Members`` a list of links, an
object where an object is expected) are checked by ``expect``/``member_paths``, so a wrong shape is
a RedfishError naming the BMC, the URL and what was expected, never a KeyError or TypeError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import socket
import ssl
import stat
import time

from ansible.module_utils.six.moves import http_client
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import urljoin, urlsplit
from ansible.module_utils.urls import Request

SERVICE_ROOT = "/redfish/v1"
MAX_BACKOFF = 16.0
# The largest real document is a BIOS attribute registry: 1.2 MB on HPE iLO 5 (ja), 1.1 MB on
# iDRAC 6 (../shared/realdata/redfish). Anything past this bound is not a Redfish resource.
MAX_BODY = 32 * 1024 * 1024
MAX_ERROR_BODY = 64 * 1024
MAX_CA_FILE = 16 * 1024 * 1024
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)


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


def _clip(text, size=120):
    text = str(text)
    return text if len(text) <= size else text[:size] + "..."


def describe(value):
    """What a JSON value is, for messages: "a list", "a string ('abc')", "an empty body (or null)"."""
    if value is None:
        return "an empty body (or null)"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean (%s)" % json.dumps(value)
    if isinstance(value, (int, float)):
        return "a number (%s)" % value
    return "a string (%r)" % _clip(value)


_EXPECTED = {dict: "an object", list: "a list", str: "a string"}


def shape_error(bmc, where, keys, value, kind):
    return RedfishError("BMC %s: in %s, %s is %s; expected %s" % (
        bmc, where, ".".join(keys) or "the document", describe(value), _EXPECTED[kind]))


def expect(bmc, where, doc, keys, kind, default=None):
    """The value at ``keys`` in the resource ``doc`` read from ``where``, checked to be ``kind``
    (dict, list or str); absent or null gives ``default``. A wrong shape on the way is a
    RedfishError naming the BMC, the URL, the property and what was expected:
    expect(bmc, "/redfish/v1/Systems/1/Bios", bios, ("Attributes",), dict, {})."""
    node = doc
    for depth, key in enumerate(keys):
        if node is None:
            return default
        if not isinstance(node, dict):
            raise shape_error(bmc, where, keys[:depth], node, dict)
        node = node.get(key)
    if node is None:
        return default
    if not isinstance(node, kind):
        raise shape_error(bmc, where, keys, node, kind)
    return node


def members(bmc, where, collection):
    """The members of a Redfish collection, each checked to be a link ({"@odata.id": "/redfish/v1/..."});
    expanded members (Dell's Jobs with JobState) keep their other properties."""
    found = expect(bmc, where, collection, ("Members",), list, [])
    for index, member in enumerate(found):
        path = member.get("@odata.id") if isinstance(member, dict) else None
        if not isinstance(path, str) or not path:
            raise RedfishError("BMC %s: in %s, Members[%d] is %s; expected a link {\"@odata.id\": <path>}" % (
                bmc, where, index, "an object without an @odata.id path" if isinstance(member, dict) else describe(member)))
    return found


def member_paths(bmc, where, collection):
    """The @odata.id paths of a collection's members (see members)."""
    return [member["@odata.id"] for member in members(bmc, where, collection)]


def printable(url):
    """Whether a URL or path is printable ASCII without spaces (what http.client sends as is)."""
    return isinstance(url, str) and bool(url) and all(33 <= ord(char) <= 126 for char in url)


def origin(url):
    """(scheme, host, port) of a URL, default ports filled in; None when it cannot be parsed."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or {"https": 443, "http": 80}.get(scheme)


def check_ca_file(name, ca_path):
    """A CA bundle that is missing, not a regular file or not PEM is named before any connection,
    instead of surfacing as "connection failed (No such file or directory)" (a FIFO would block)."""
    problem = None
    try:
        info = os.stat(ca_path)
        if not stat.S_ISREG(info.st_mode):
            problem = "not a regular file"
        elif info.st_size > MAX_CA_FILE:
            problem = "%d bytes, too big for a CA bundle" % info.st_size
        else:
            ssl.create_default_context(cafile=ca_path)
    except ssl.SSLError as exc:
        problem = "holds no usable PEM CA certificate (%s)" % (exc.reason or exc)
    except OSError as exc:
        problem = "no such file" if exc.errno == errno.ENOENT else "cannot be read (%s)" % (exc.strerror or exc)
    if problem:
        raise RedfishError("BMC %s: ca_path %s: %s" % (name, ca_path, problem))


class RedfishClient:
    """One BMC. ``name`` (the base URL) prefixes every error message."""

    def __init__(self, baseurl, username, password, validate_certs=True, ca_path=None, timeout=10,
                 retries=3, auth="basic", backoff=0.5, sleep=time.sleep):
        try:
            parts = urlsplit(baseurl or "")
        except ValueError:
            parts = None
        if parts is not None and (parts.username or parts.password):  # first: never echo them
            raise RedfishError("BMC %s://%s: put credentials in username/password, not in baseurl" % (
                parts.scheme, parts.hostname))
        base_origin = origin(baseurl) if parts is not None and "://" in baseurl else None
        if base_origin is None or base_origin[0] not in ("https", "http") or not base_origin[1]:
            raise RedfishError("BMC %r: baseurl must look like https://<address>[:port]" % (baseurl,))
        if not printable(baseurl) or parts.query or parts.fragment:
            raise RedfishError("BMC %r: baseurl must look like https://<address>[:port], in printable ASCII without "
                               "spaces, a query or a fragment" % (baseurl,))
        self.base = baseurl.rstrip("/")
        self.name = self.base
        self.origin = base_origin
        self.username = username
        self._password = password
        self.auth = auth
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.sleep = sleep
        self.validate_certs = validate_certs
        self.ca_path = ca_path
        if ca_path:
            check_ca_file(self.name, ca_path)
        self._token = None
        self._session_uri = None
        self.requests = 0

    # -- plumbing ------------------------------------------------------------------------------
    def _url(self, path, private):
        """The URL of a path or link. A link to another scheme, host or port is refused when the
        request carries credentials or a body (``private``): a BMC's links never leave it."""
        if not printable(path):
            raise RedfishError("BMC %s: %r is not a URL path (printable ASCII without spaces expected)" % (
                self.name, _clip(path)))
        if not (path.startswith("http://") or path.startswith("https://")):
            return self.base + path
        if private and origin(path) != self.origin:
            raise RedfishError("BMC %s: refusing to send credentials to %s (another scheme, host or port than "
                               "the BMC)" % (self.name, path))
        return path

    def _open(self, method, url, body, use_auth, extra_headers=None):
        headers = {"Accept": "application/json", "OData-Version": "4.0"}
        headers.update(extra_headers or {})
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        # Redirects are _exchange's: ansible's handler would re-send the Authorization header anywhere.
        kwargs = dict(headers=headers, timeout=self.timeout, validate_certs=self.validate_certs,
                      follow_redirects="none")
        if self.ca_path:
            kwargs["ca_path"] = self.ca_path
        if use_auth and self._token:
            headers["X-Auth-Token"] = self._token
        elif use_auth:
            kwargs.update(url_username=self.username, url_password=self._password, force_basic_auth=True)
        self.requests += 1
        return Request().open(method, url, data=data, **kwargs)

    def _exchange(self, method, path, body, use_auth, headers):
        """(status, headers, raw body) of one request. A redirect is followed (at most
        MAX_REDIRECTS times) only to the same scheme, host and port: the credentials (basic
        Authorization, X-Auth-Token, a session login's password) must never follow a BMC, or a man
        in the middle, to http:// or to another host. 303 turns into a GET, as the standard says."""
        url = self._url(path, use_auth or body is not None)
        for _hop in range(MAX_REDIRECTS + 1):
            try:
                resp = self._open(method, url, body, use_auth, headers)
            except HTTPError as exc:
                if exc.code not in REDIRECTS:
                    raise
                url = self._redirect_target(method, url, exc)
                if exc.code == 303:
                    method, body = "GET", None
                continue
            return resp.getcode(), dict(resp.headers.items()), self._read(resp, method, path)
        raise RedfishError("BMC %s: %s %s: more than %d redirects (the last to %s)" % (
            self.name, method, path, MAX_REDIRECTS, url))

    def _redirect_target(self, method, url, exc):
        location = ((exc.headers.get("Location") if exc.headers else None) or "").strip()
        if not location:
            raise RedfishError("BMC %s: %s %s answered HTTP %d without a Location" % (self.name, method, url, exc.code))
        try:
            target = urljoin(url, location)
        except ValueError:
            target = location
        if not printable(target) or origin(target) is None or origin(target) != origin(url):
            raise RedfishError("BMC %s: %s %s is redirected (HTTP %d) to %s, another scheme, host or port: not "
                               "followed, so no credentials go there; set baseurl to the address the BMC serves" % (
                                   self.name, method, url, exc.code, _clip(target, 300)))
        return target

    def _read(self, resp, method, path):
        raw = resp.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            raise RedfishError("BMC %s: %s %s answered more than %d MiB; expected a Redfish resource, not read "
                               "further" % (self.name, method, path, MAX_BODY // (1024 * 1024)))
        return raw

    def request(self, method, path, body=None, use_auth=True, ok=(200, 201, 202, 204), headers=None, retries=None):
        """Send one request with retries; return Response (body None when empty) or raise RedfishError."""
        attempts = (self.retries if retries is None else retries) + 1
        last = None
        tried = 0
        for attempt in range(attempts):
            tried = attempt + 1
            try:
                status, answer_headers, raw = self._exchange(method, path, body, use_auth, headers)
            except HTTPError as exc:
                answer_headers = dict(exc.headers.items()) if exc.headers else {}
                raw = self._error_body(exc)
                if exc.code < 500:
                    raise self._http_error(method, path, exc.code, exc.reason, raw)
                last = "HTTP %d %s" % (exc.code, exc.reason)
                self._backoff(attempt, attempts, answer_headers.get("Retry-After") or answer_headers.get("retry-after"))
                continue
            except (ssl.SSLError, ssl.CertificateError) as exc:
                raise self._tls_error(exc)
            except (OSError, http_client.HTTPException) as exc:  # URLError and timeouts are OSErrors
                last, again = self._transport_problem(method, exc)
                if not again:
                    break
                self._backoff(attempt, attempts, None)
                continue
            if status not in ok:
                raise self._http_error(method, path, status, "", raw)
            return Response(status, answer_headers, self._decode(method, path, raw))
        raise RedfishError("BMC %s: %s %s failed after %d attempt(s): %s" % (
            self.name, method, path, tried, last))

    def _transport_problem(self, method, exc):
        """(what went wrong below HTTP, whether to try again). A POST that may have reached the BMC
        (timeout, reset, broken answer) is never sent again: the reset or job may have been processed."""
        reason = exc.reason if isinstance(exc, URLError) else exc
        if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
            raise self._tls_error(reason)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return "no answer within %ss (timed out)" % self.timeout, method != "POST"
        if isinstance(reason, http_client.HTTPException):
            return "answered something that is not HTTP (%s: %s)" % (
                type(reason).__name__, _clip(reason)), method != "POST"
        if isinstance(exc, URLError):
            return "cannot connect (%s)" % (reason,), not (method == "POST" and isinstance(reason, ConnectionResetError))
        return "connection failed (%s)" % (exc,), method != "POST" or isinstance(exc, ConnectionRefusedError)

    @staticmethod
    def _error_body(exc):
        try:
            return exc.read(MAX_ERROR_BODY) or b""
        except Exception:  # pylint: disable=broad-except
            return b""

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
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise RedfishError("BMC %s: %s %s answered something that is not JSON: %r; expected a JSON object" % (
                self.name, method, path, raw[:120]))

    def _http_error(self, method, path, status, reason, raw):
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = {}
        if status == 401:
            return RedfishError("BMC %s: 401 Unauthorized for user %r on %s %s: wrong username or password (%s auth)" % (
                self.name, self.username, method, path, self.auth), status)
        if status == 403:
            return RedfishError("BMC %s: 403 Forbidden for user %r on %s %s: the account lacks the privilege" % (
                self.name, self.username, method, path), status)
        details = "; ".join(redfish_messages(body)) or (reason or "no details")
        return RedfishError("BMC %s: %s %s answered HTTP %d: %s" % (self.name, method, path, status, _clip(details, 500)), status)

    def _tls_error(self, exc):
        return RedfishError(
            "BMC %s: TLS failed (%s). Give the BMC's CA certificate in ca_path, or set validate_certs: false "
            "to opt out of certificate checks explicitly" % (self.name, exc))

    def _object(self, path, body):
        """A GET's answer must be a JSON object (every Redfish resource is one)."""
        if not isinstance(body, dict):
            raise RedfishError("BMC %s: GET %s answered %s; expected a JSON object (a Redfish resource)" % (
                self.name, path, describe(body)))
        return body

    # -- verbs ---------------------------------------------------------------------------------
    def get(self, path):
        return self._object(path, self.request("GET", path).body)

    def get_with_etag(self, path):
        """(body, ETag) of a resource: the ETag header, else the body's @odata.etag, else None."""
        resp = self.request("GET", path)
        body = self._object(path, resp.body)
        etag = resp.header("ETag") or body.get("@odata.etag")
        return body, etag if isinstance(etag, str) and etag else None

    def get_public(self, url):
        """GET an absolute URL outside the BMC (a registry's PublicationUri): no credentials are
        sent, TLS is verified as for the BMC, one attempt only (air-gapped sites never answer)."""
        return self._object(url, self.request("GET", url, use_auth=False, retries=0).body)

    def patch(self, path, body, headers=None):
        return self.request("PATCH", path, body, headers=headers)

    def post(self, path, body):
        return self.request("POST", path, body)

    # -- sessions ------------------------------------------------------------------------------
    def login(self):
        """Open a Redfish session when auth=session (Links.Sessions of the service root)."""
        if self.auth != "session" or self._token:
            return
        root = self._object(SERVICE_ROOT, self.request("GET", SERVICE_ROOT, use_auth=False).body)
        sessions = link(root, "Links", "Sessions")
        if not sessions:
            raise RedfishError("BMC %s: the service root has no Links.Sessions; use auth: basic" % self.name)
        resp = self.request("POST", sessions, {"UserName": self.username, "Password": self._password}, use_auth=False)
        token = resp.header("X-Auth-Token")
        if not token:
            raise RedfishError("BMC %s: POST %s gave no X-Auth-Token" % (self.name, sessions))
        self._token = token
        self._session_uri = resp.header("Location") or link(resp.body)

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
        systems_path = link(root, "Systems")
        if not systems_path:
            raise RedfishError("BMC %s: the service root links no Systems collection" % self.name)
        paths = member_paths(self.name, systems_path, self.get(systems_path))
        return select_system(self.name, paths, system_id, self.get, usable, purpose)


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


def dig(resource, *keys):
    """The value at nested keys, or None when a step is missing or not an object."""
    node = resource
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def link(resource, *keys):
    """Follow nested keys to an @odata.id path, or None. link(system, "Bios") -> "/redfish/v1/Systems/1/Bios";
    link(resource) is the resource's own @odata.id. Anything but a non-empty string is no link."""
    node = dig(resource, *keys)
    if isinstance(node, list):
        node = node[0] if node else None
    path = node.get("@odata.id") if isinstance(node, dict) else None
    return path if isinstance(path, str) and path else None


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


# Option ranges: (lowest, highest, unit). A zero or negative timeout, a retry count in the
# thousands (16 s of backoff each) or a NaN would make a module hang, spin or crash half-way.
CONNECTION_RANGES = {"timeout": (1, 3600, "seconds"), "retries": (0, 10, "retries")}


def check_ranges(params, ranges):
    """Every numeric option given in ``ranges`` within its bounds, else a RedfishError naming the
    option, its value and the bounds. Called before the first request (NaN fails every bound)."""
    for name in sorted(ranges):
        low, high, unit = ranges[name]
        value = params.get(name)
        if value is not None and not low <= value <= high:
            raise RedfishError("option %s=%r is out of range: give %s between %s and %s; nothing was sent" % (
                name, value, unit, low, high))


def run_module(module, work, ranges=None, check=None):
    """The body of every Redfish module: the options checked (connection ranges, the module's
    ``ranges``, its ``check(params)``) before anything is sent, a client from the connection
    options, ``work(client)`` for the result, a logout whatever happens, and one fail_json naming
    the BMC (or the option) and the cause."""
    try:
        limits = dict(CONNECTION_RANGES)
        limits.update(ranges or {})
        check_ranges(module.params, limits)
        if check is not None:
            check(module.params)
        client = client_from(module.params)
        try:
            result = work(client)
        finally:
            client.logout()
    except RedfishError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)
