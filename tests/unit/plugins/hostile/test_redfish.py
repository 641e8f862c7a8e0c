"""Hostile BMCs and hostile options for redfish_bios and redfish_power, against real HTTP(S)
servers on 127.0.0.1 (a self-signed certificate made here with the openssl CLI).

Every case ends in a clear error naming the BMC (its host and port), the URL or option and what was
expected, with nothing changed before it (no POST, no PATCH recorded by the server), or in the
documented result. Credentials never leave the BMC's scheme, host and port: a listener standing for
"somewhere else" records every connection, and must see none.
"""
import json
import os
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

COVERS = ["module:redfish_bios", "module:redfish_power"]

USER, PASSWORD = "root", "hostile-test-secret"
ROOT = "/redfish/v1"
SYSTEM = ROOT + "/Systems/1"
BIOS = SYSTEM + "/Bios"
SETTINGS = BIOS + "/Settings"
RESET = SYSTEM + "/Actions/ComputerSystem.Reset"
REGISTRY_ENTRY = ROOT + "/Registries/BiosAttributeRegistry.v1_0_0"
REGISTRY = ROOT + "/registrystore/bios.json"
WRITES = ("POST", "PATCH", "PUT", "DELETE")


def standard_routes():
    """A small, well-formed BMC: one system with a reset action and a Bios, its registry."""
    return {
        ROOT: {"Systems": {"@odata.id": ROOT + "/Systems"}, "Registries": {"@odata.id": ROOT + "/Registries"},
               "Links": {"Sessions": {"@odata.id": ROOT + "/SessionService/Sessions"}}},
        ROOT + "/Systems": {"Members": [{"@odata.id": SYSTEM}]},
        SYSTEM: {"@odata.id": SYSTEM, "Manufacturer": "Contoso", "PowerState": "On", "Bios": {"@odata.id": BIOS},
                 "Actions": {"#ComputerSystem.Reset": {"target": RESET, "ResetType@Redfish.AllowableValues": ["On", "ForceOff"]}}},
        BIOS: {"@odata.id": BIOS, "AttributeRegistry": "BiosAttributeRegistry.v1_0_0",
               "Attributes": {"LogicalProc": "Enabled"},
               "@Redfish.Settings": {"SettingsObject": {"@odata.id": SETTINGS}}},
        SETTINGS: {"Attributes": {}},
        ROOT + "/Registries": {"Members": [{"@odata.id": REGISTRY_ENTRY}]},
        REGISTRY_ENTRY: {"Id": "BiosAttributeRegistry.v1_0_0", "Location": [{"Language": "en", "Uri": REGISTRY}]},
        REGISTRY: {"Id": "BiosAttributeRegistry.v1_0_0", "RegistryEntries": {"Attributes": [
            {"AttributeName": "LogicalProc", "Type": "Enumeration", "DisplayName": "Logical Processor",
             "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]}]}},
    }


class Answer:
    """A raw answer: status, headers, body bytes (a route's value when JSON is not wanted)."""

    def __init__(self, status=200, body=b"", headers=None):
        self.status, self.body, self.headers = status, body, headers or {}


class FakeBmc:
    """A Redfish server on 127.0.0.1 (HTTPS with ``cert``), answering ``routes`` and recording
    every request as (method, path, headers, body)."""

    def __init__(self, routes, cert=None):
        self.routes = routes
        self.requests = []
        bmc = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _any(self):
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                bmc.requests.append((self.command, self.path, dict(self.headers.items()), body))
                answer = bmc.routes.get(self.path.rstrip("/") if self.path != "/" else self.path, Answer(404, b"{}"))
                if self.command in WRITES and not isinstance(answer, Answer):
                    answer = Answer(204)
                if not isinstance(answer, Answer):
                    answer = Answer(200, json.dumps(answer).encode())
                self.send_response(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert["cert"], cert["key"])
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def port(self):
        return self.server.server_address[1]

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def writes(self):
        return [(method, path) for method, path, _h, _b in self.requests if method in WRITES]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Elsewhere:
    """Another place on 127.0.0.1 (a plain TCP listener): counts connections and keeps every byte it
    receives, answering a minimal HTTP 200 so a client that came would go on."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.05)
        self.connections = 0
        self.received = b""
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(0.5)
            try:
                self.received += conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            except OSError:
                pass
            conn.close()

    @property
    def port(self):
        return self.sock.getsockname()[1]

    def close(self):
        self.stop = True
        self.thread.join(1)
        self.sock.close()


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (and localhost): the server's, and the CA the client trusts."""
    folder = tmp_path_factory.mktemp("bmc-cert")
    paths = {"cert": str(folder / "cert.pem"), "key": str(folder / "key.pem")}
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", paths["key"], "-out", paths["cert"]], check=True, capture_output=True)
    return paths


@pytest.fixture
def bmc(cert):
    """bmc(routes=None, **overrides) -> a running HTTPS FakeBmc (standard routes with overrides)."""
    made = []

    def _start(routes=None, **overrides):
        server = FakeBmc(dict(routes or standard_routes(), **overrides), cert)
        made.append(server)
        return server

    yield _start
    for server in made:
        server.close()


@pytest.fixture
def elsewhere():
    listener = Elsewhere()
    yield listener
    listener.close()


def conn(server, cert, **extra):
    args = dict(baseurl=server.url, username=USER, password=PASSWORD, ca_path=cert["cert"], timeout=2, retries=0)
    args.update(extra)
    return args


def bios_args(server, cert, **extra):
    return conn(server, cert, attributes={"LogicalProc": "Disabled"}, **extra)


def assert_untouched(server, outcome):
    assert server.writes() == [], "changed the BMC before failing: %r" % server.writes()
    assert PASSWORD not in json.dumps(dict((k, v) for k, v in outcome.items() if k != "_stderr"))


# -- the fake BMC is a BMC: the modules work against it (so the failures below are the cases') ------
def test_positive_control_bios_patches_and_power_predicts(bmc, cert, run_module, succeeded):
    server = bmc()
    result = run_module("redfish_bios", bios_args(server, cert))
    succeeded(result)
    assert result["changed_attributes"] == {"LogicalProc": "Disabled"}
    assert server.writes() == [("PATCH", SETTINGS)]
    result = run_module("redfish_power", conn(server, cert, state="on"))
    succeeded(result)
    assert result["changed"] is False and result["power_state"] == "On"


# -- 1. redirects never carry credentials to another scheme, host or port ----------------------
@pytest.mark.parametrize("status,target", [
    (301, "http://127.0.0.1:{other}/redfish/v1"), (302, "http://127.0.0.1:{other}/redfish/v1"),
    (307, "https://127.0.0.1:{other}/redfish/v1"), (308, "https://localhost:{port}/redfish/v1"),
    (302, "//127.0.0.1:{other}/redfish/v1"), (307, "http://127.0.0.1:{port}/redfish/v1"),
])
def test_redirect_elsewhere_is_refused_and_sends_nothing_there(bmc, cert, elsewhere, run_module, clear_error, status, target):
    server = bmc()
    where = target.format(other=elsewhere.port, port=server.port)
    server.routes[ROOT] = Answer(status, b"", {"Location": where})
    outcome = run_module("redfish_power", conn(server, cert))
    assert b"authorization" not in elsewhere.received.lower() and elsewhere.connections == 0
    shown = where if where.startswith("http") else "https:" + where
    clear_error(outcome, server.url, server.url + ROOT, shown, "redirect")
    assert_untouched(server, outcome)


def test_session_login_redirected_to_http_never_sends_the_password(bmc, cert, elsewhere, run_module, clear_error):
    server = bmc()
    server.routes[ROOT + "/SessionService/Sessions"] = Answer(
        307, b"", {"Location": "http://127.0.0.1:%d/login" % elsewhere.port})
    outcome = run_module("redfish_power", conn(server, cert, auth="session"))
    clear_error(outcome, server.url, "http://127.0.0.1:%d/login" % elsewhere.port)
    assert elsewhere.connections == 0 and PASSWORD.encode() not in elsewhere.received
    assert server.writes() == [("POST", ROOT + "/SessionService/Sessions")]


def test_a_link_to_another_host_gets_no_credentials(bmc, cert, elsewhere, run_module, clear_error):
    server = bmc()
    foreign = "http://127.0.0.1:%d/redfish/v1/Systems/1" % elsewhere.port
    server.routes[ROOT + "/Systems"] = {"Members": [{"@odata.id": foreign}]}
    outcome = run_module("redfish_power", conn(server, cert))
    clear_error(outcome, server.url, foreign, "credentials")
    assert elsewhere.connections == 0
    assert_untouched(server, outcome)


def test_same_origin_redirect_is_followed(bmc, cert, run_module, succeeded):
    """Real BMCs redirect /redfish/v1/Systems to /redfish/v1/Systems/ and the like: followed, with
    credentials, on the same scheme, host and port."""
    server = bmc()
    server.routes["/redfish/v1/Systems"] = Answer(301, b"", {"Location": "/redfish/v1/Systems2"})
    server.routes["/redfish/v1/Systems2"] = {"Members": [{"@odata.id": SYSTEM}]}
    outcome = run_module("redfish_power", conn(server, cert, state="on"))
    succeeded(outcome)
    followed = [h for method, path, h, _b in server.requests if path == "/redfish/v1/Systems2"]
    assert followed and "Authorization" in followed[0]


def test_redirect_loop_is_bounded(bmc, cert, run_module, clear_error):
    server = bmc()
    server.routes[ROOT] = Answer(302, b"", {"Location": ROOT + "/"})
    clear_error(run_module("redfish_power", conn(server, cert)), server.url, "redirects")


# -- 2. every option checked before the first request -----------------------------------------
@pytest.mark.parametrize("module,option,value", [
    ("redfish_power", "poll_interval", -1), ("redfish_power", "poll_interval", 0),
    ("redfish_power", "poll_interval", "nan"), ("redfish_power", "poll_interval", "inf"),
    ("redfish_power", "wait_timeout", -5), ("redfish_power", "wait_timeout", 0),
    ("redfish_power", "force_after", -1), ("redfish_power", "timeout", 0), ("redfish_power", "timeout", -3),
    ("redfish_power", "retries", -1), ("redfish_power", "retries", 1000), ("redfish_power", "wait_timeout", 10 ** 12),
    ("redfish_bios", "timeout", 0), ("redfish_bios", "retries", -2), ("redfish_bios", "timeout", 10 ** 9),
])
def test_nonsense_numbers_fail_before_any_request(bmc, cert, run_module, clear_error, module, option, value):
    server = bmc()
    args = bios_args(server, cert) if module == "redfish_bios" else conn(server, cert)
    args[option] = value
    outcome = run_module(module, args)
    clear_error(outcome, option)
    assert server.requests == [], "requests made before the option was refused: %r" % server.requests


@pytest.mark.parametrize("attributes,named", [
    ({"LogicalProc": None}, "attributes.LogicalProc"), ({"LogicalProc": ["Enabled"]}, "attributes.LogicalProc"),
    ({"LogicalProc": {"a": 1}}, "attributes.LogicalProc"), ({" ": "x"}, "attribute name"),
    ({}, "nothing to do"),
])
def test_bios_attribute_garbage_fails_before_any_request(bmc, cert, run_module, clear_error, attributes, named):
    server = bmc()
    outcome = run_module("redfish_bios", conn(server, cert, attributes=attributes))
    clear_error(outcome, named)
    assert server.requests == []


# -- 3. the CA file is named, before connecting ------------------------------------------------
@pytest.mark.parametrize("kind,cause", [("missing", "no such file"), ("folder", "not a regular file"),
                                        ("fifo", "not a regular file"), ("empty", "holds no usable PEM"),
                                        ("garbage", "holds no usable PEM")])
def test_bad_ca_path_is_named_before_connecting(bmc, cert, tmp_path, run_module, clear_error, kind, cause):
    server = bmc()
    path = tmp_path / "bmc-ca.pem"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    for module in ("redfish_power", "redfish_bios"):
        outcome = run_module(module, bios_args(server, cert, ca_path=str(path)) if module == "redfish_bios"
                             else conn(server, cert, ca_path=str(path)))
        clear_error(outcome, "ca_path %s: %s" % (path, cause), server.url)
    assert server.requests == []


# -- 4. wrong JSON shapes from the BMC ------------------------------------------------------------
NOT_JSON = [
    ("service root is a list", ROOT, [{"Systems": {"@odata.id": ROOT + "/Systems"}}], "expected a JSON object"),
    ("service root is html", ROOT, Answer(200, b"<html><body>Login</body></html>", {"Content-Type": "text/html"}),
     "not JSON"),
    ("service root is not json", ROOT, Answer(200, b"{'Systems': nope"), "not JSON"),
    ("service root is empty", ROOT, Answer(200, b""), "empty body"),
    ("service root is null", ROOT, Answer(200, b"null"), "empty body"),
    ("service root nests too deep", ROOT, Answer(200, b"[" * 200000), "not JSON"),
    ("service root is not utf-8", ROOT, Answer(200, b'{"a": "\xff\xfe"}'), "not JSON"),
    ("Members is a string", ROOT + "/Systems", {"Members": "/redfish/v1/Systems/1"}, "Members is a string"),
    ("Members is an object", ROOT + "/Systems", {"Members": {"@odata.id": SYSTEM}}, "Members is an object"),
    ("member without @odata.id", ROOT + "/Systems", {"Members": [{"Id": "1"}]}, "Members[0]"),
    ("member @odata.id a number", ROOT + "/Systems", {"Members": [{"@odata.id": 7}]}, "Members[0]"),
    ("member is a string", ROOT + "/Systems", {"Members": [SYSTEM]}, "Members[0] is a string"),
    ("member path is not ASCII", ROOT + "/Systems", {"Members": [{"@odata.id": SYSTEM + "\u00e9"}]}, "not a URL path"),
    ("system is empty", SYSTEM, Answer(200, b"   "), "empty body"),
    ("system is a list", SYSTEM, [], "expected a JSON object"),
]
POWER_SHAPES = [
    ("reset action is a list", SYSTEM, dict(standard_routes()[SYSTEM], Actions={"#ComputerSystem.Reset": [RESET]}),
     "#ComputerSystem.Reset is a list"),
    ("Actions is a string", SYSTEM, dict(standard_routes()[SYSTEM], Actions="reset"), "Actions is a string"),
    ("target is a number", SYSTEM, dict(standard_routes()[SYSTEM], Actions={"#ComputerSystem.Reset": {"target": 5}}),
     "target is a number"),
]
BIOS_SHAPES = [
    ("Attributes is a list", BIOS, dict(standard_routes()[BIOS], Attributes=["LogicalProc"]), "Attributes is a list"),
    ("settings Attributes is a string", SETTINGS, {"Attributes": "LogicalProc=Enabled"}, "Attributes is a string"),
    ("@Redfish.Settings is a list", BIOS, dict(standard_routes()[BIOS], **{"@Redfish.Settings": []}),
     "@Redfish.Settings is a list"),
    ("SupportedApplyTimes is a string", BIOS, dict(standard_routes()[BIOS], **{"@Redfish.Settings": {
        "SettingsObject": {"@odata.id": SETTINGS}, "SupportedApplyTimes": "OnReset"}}), "SupportedApplyTimes is a string"),
    ("AttributeRegistry is a number", BIOS, dict(standard_routes()[BIOS], AttributeRegistry=3), "AttributeRegistry is a number"),
    ("Manufacturer is an object", SYSTEM, dict(standard_routes()[SYSTEM], Manufacturer={"Name": "Dell"}),
     "Manufacturer is an object"),
    ("Registries Members is an object", ROOT + "/Registries", {"Members": {}}, "Members is an object"),
    ("registry entries are a list", REGISTRY, {"RegistryEntries": []}, "RegistryEntries is a list"),
    ("registry Attributes is an object", REGISTRY, {"RegistryEntries": {"Attributes": {"LogicalProc": {}}}},
     "RegistryEntries.Attributes is an object"),
    ("registry entry without AttributeName", REGISTRY, {"RegistryEntries": {"Attributes": [{"Type": "String"}]}},
     "Attributes[0] has no AttributeName"),
    ("registry AttributeName is a list", REGISTRY, {"RegistryEntries": {"Attributes": [{"AttributeName": ["x"]}]}},
     "Attributes[0] has no AttributeName"),
    ("registry Value is a string", REGISTRY, {"RegistryEntries": {"Attributes": [
        {"AttributeName": "LogicalProc", "Type": "Enumeration", "Value": "Enabled"}]}}, "Value is a string"),
    ("registry ValueName is a list", REGISTRY, {"RegistryEntries": {"Attributes": [
        {"AttributeName": "LogicalProc", "Type": "Enumeration", "Value": [{"ValueName": ["Enabled"]}]}]}},
     "ValueName is a string"),
    ("registry DisplayName is a number", REGISTRY, {"RegistryEntries": {"Attributes": [
        {"AttributeName": "LogicalProc", "DisplayName": 4}]}}, "DisplayName is a number"),
    ("registry Dependencies is an object", REGISTRY, {"RegistryEntries": {"Attributes": [], "Dependencies": {}}},
     "Dependencies is an object"),
    ("registry Dependency is a string", REGISTRY, {"RegistryEntries": {"Attributes": [], "Dependencies": [
        {"DependencyFor": "LogicalProc", "Dependency": "x"}]}}, "Dependencies[0]"),
]


@pytest.mark.parametrize("case,path,answer,expected", NOT_JSON + POWER_SHAPES, ids=[c[0] for c in NOT_JSON + POWER_SHAPES])
def test_power_wrong_shapes_are_named(bmc, cert, run_module, clear_error, case, path, answer, expected):
    server = bmc(**{path: answer})
    outcome = run_module("redfish_power", conn(server, cert))
    clear_error(outcome, server.url, path, expected)
    assert_untouched(server, outcome)


@pytest.mark.parametrize("case,path,answer,expected", NOT_JSON[:1] + NOT_JSON[7:8] + BIOS_SHAPES,
                         ids=[c[0] for c in NOT_JSON[:1] + NOT_JSON[7:8] + BIOS_SHAPES])
def test_bios_wrong_shapes_are_named(bmc, cert, run_module, clear_error, case, path, answer, expected):
    server = bmc(**{path: answer})
    outcome = run_module("redfish_bios", bios_args(server, cert))
    clear_error(outcome, server.url, path, expected)
    assert_untouched(server, outcome)


def test_huge_body_is_not_read_whole(bmc, cert, run_module, clear_error):
    server = bmc(**{ROOT: Answer(200, b" " * (33 * 1024 * 1024))})
    outcome = run_module("redfish_power", conn(server, cert))
    clear_error(outcome, server.url, ROOT, "more than 32 MiB")
    assert_untouched(server, outcome)


# -- 5. a BMC that never answers, or answers no HTTP ------------------------------------------
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_stalled_bmc_is_bounded_by_the_timeout(run_module, clear_error, scheme):
    """The kernel completes the TCP handshake for a listening socket nobody accepts on: the BMC
    takes the connection and never says a word (nor a TLS handshake)."""
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(8)
    url = "%s://127.0.0.1:%d" % (scheme, stalled.getsockname()[1])
    try:
        outcome = run_module("redfish_power", dict(baseurl=url, username=USER, password=PASSWORD, timeout=1,
                                                   retries=0, validate_certs=False), timeout=20)
    finally:
        stalled.close()
    clear_error(outcome, url, ROOT, "no answer within 1s")


def test_garbage_instead_of_http_is_named(run_module, clear_error):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def answer():
        conn, _addr = listener.accept()
        conn.recv(65536)
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    try:
        outcome = run_module("redfish_power", dict(baseurl=url, username=USER, password=PASSWORD, timeout=1, retries=0))
    finally:
        thread.join(2)
        listener.close()
    clear_error(outcome, url, ROOT, "not HTTP")
