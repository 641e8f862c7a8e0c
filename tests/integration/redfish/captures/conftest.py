"""A small HTTPS Redfish server of the tests' own, serving one real BMC capture (tests/fixtures/realdata/redfish),
or a capture-shaped fixture of ours (tests/fixtures/redfish/<folder>, same layout).

The capture is a Redfish-Mockup-Creator tree, `<folder>/redfish/v1/<path>/index.json`. The server
answers like the BMC it was captured from, for what BIOS work needs:

- GET by path (case-insensitive, trailing slash and %-escapes tolerated, as iLO and iDRAC are), with
  an ETag header (the resource's @odata.etag, or a hash);
- PATCH of the Bios settings object held in memory: If-Match checked against its ETag (412 when it
  differs; 428 when absent and the capture is AMI's, as AMI BMCs answer), names and values checked
  against the capture's registry (400 like a BMC), `@Redfish.SettingsApplyTime` refused where the
  Bios does not advertise it; settings objects that hold every attribute (Lenovo, HPE, AMI) keep
  doing so; Dell creates a BIOS job for an OnReset PATCH or a POST to the manager's Jobs;
- POST ComputerSystem.Reset applies pending (Dell: only with a scheduled job).

Every request is logged (method, path, headers) so a test can assert that no PATCH was sent.
Basic auth only. 127.0.0.1 only.
"""
import base64
import hashlib
import http.server
import json
import os
import ssl
import threading
import urllib.parse

import pytest

USER = "fleetadmin"
PASSWORD = "Capture-BMC-pw-never-logged"
CAPTURES = ("dell-r750-idrac6", "lenovo-sr670v2-xcc", "hpe-dl385g10plus-ilo5", "nvidia-dgx-h100-ami")


def _load_tree(folder):
    tree = {}
    for dirpath, _dirs, files in os.walk(folder):
        if "index.json" in files:
            rel = os.path.relpath(dirpath, folder).replace(os.sep, "/")
            with open(os.path.join(dirpath, "index.json")) as handle:
                tree["/" + rel if rel != "." else "/"] = json.load(handle)
    return tree


def _key(path):
    return urllib.parse.unquote(path.split("?", 1)[0]).rstrip("/").lower() or "/"


class Capture:
    """The capture's resources in memory and the BIOS behaviour on top of them."""

    def __init__(self, folder, manufacturer=None):
        self.name = os.path.basename(folder)
        self.docs = {}
        for path, doc in _load_tree(folder).items():
            self.docs[_key(path)] = doc
        self.requests = []
        self.lock = threading.Lock()
        self.require_if_match = "ami" in self.name
        self.jobs = {}
        systems = self.get("/redfish/v1/Systems")["Members"]
        self.system_path = None
        for member in systems:
            doc = self.get(member["@odata.id"])
            if doc.get("Bios"):
                self.system_path = member["@odata.id"]
                if manufacturer is not None:
                    doc["Manufacturer"] = manufacturer
        system = self.get(self.system_path)
        self.bios_path = system["Bios"]["@odata.id"]
        bios = self.get(self.bios_path)
        self.settings_path = bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
        self.apply_times = bios["@Redfish.Settings"].get("SupportedApplyTimes") or []
        self.full_settings = len(self.get(self.settings_path).get("Attributes") or {}) > 0
        self.reset_target = system["Actions"]["#ComputerSystem.Reset"]["target"]
        self.dell = "dell" in self.name
        self.manager_path = (system.get("Links", {}).get("ManagedBy") or [{}])[0].get("@odata.id")
        self.registry = self._registry(set(bios.get("Attributes") or {}))
        self.etag_counter = 0
        self.off_reads = 0   # after a reset the system reads Off this many times, then On
        self.hide_etag = 0   # the next N GETs of the settings object carry no ETag
        self.stale = 0       # the next N PATCHes find the settings object changed (another client wrote)

    def _registry(self, names):
        """The registry the BMC checks a PATCH with: of its attribute registries (English), the one
        describing most of the Bios's attributes (a service may offer others, for other devices)."""
        best, covered = None, -1
        for path, doc in sorted(self.docs.items()):
            entries = (doc.get("RegistryEntries") or {}).get("Attributes")
            if entries and "/ja/" not in path and "/zh/" not in path:
                count = len(names & set(e["AttributeName"] for e in entries))
                if count > covered:
                    best, covered = entries, count
        if best is None:
            raise AssertionError("capture %s has no attribute registry" % self.name)
        return dict((e["AttributeName"], e) for e in best)

    def get(self, path):
        return self.docs.get(_key(path))

    def etag(self, doc):
        if doc.get("@odata.etag"):
            return doc["@odata.etag"]
        return '"%s"' % hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]

    def bump(self, doc):
        self.etag_counter += 1
        doc["@odata.etag"] = '"gpufleet-test-%d"' % self.etag_counter

    # -- BIOS ------------------------------------------------------------------------------------
    def current(self):
        return self.get(self.bios_path)["Attributes"]

    def settings(self):
        return self.get(self.settings_path).setdefault("Attributes", {})

    def pending(self):
        return dict((k, v) for k, v in self.settings().items() if self.current().get(k) != v)

    def check(self, attributes):
        for name, value in attributes.items():
            entry = self.registry.get(name)
            if entry is None:
                return "Base.1.12.PropertyUnknown", "The property %s is not in the list of valid properties." % name
            if entry.get("Type") == "Enumeration" and value not in [v["ValueName"] for v in entry.get("Value", [])]:
                return "Base.1.12.PropertyValueNotInList", "The value %r for %s is not in the list." % (value, name)
        return None

    def patch_settings(self, body, if_match):
        doc = self.get(self.settings_path)
        if if_match is None and self.require_if_match:
            return 428, {"error": {"code": "Base.1.12.PreconditionRequired",
                                   "message": "A precondition header or annotation is required to change this resource."}}, {}
        if if_match is not None and self.stale > 0:
            self.stale -= 1
            self.bump(doc)
        if if_match is not None and if_match != self.etag(doc):
            return 412, {"error": {"code": "Base.1.12.PreconditionFailed",
                                   "message": "The ETag supplied did not match the ETag required."}}, {}
        if "@Redfish.SettingsApplyTime" in body and not self.apply_times:
            return 400, {"error": {"code": "Base.1.12.PropertyUnknown",
                                   "message": "The property @Redfish.SettingsApplyTime is not supported."}}, {}
        attributes = body.get("Attributes") or {}
        problem = self.check(attributes)
        if problem:
            return 400, {"error": {"code": problem[0], "message": problem[1],
                                   "@Message.ExtendedInfo": [{"MessageId": problem[0], "Message": problem[1]}]}}, {}
        self.settings().update(attributes)
        self.bump(doc)
        headers = {}
        apply_time = (body.get("@Redfish.SettingsApplyTime") or {}).get("ApplyTime")
        if self.dell and apply_time == "OnReset":
            headers["Location"] = self.create_job()
            return 202, {}, headers
        return 200, {"@Message.ExtendedInfo": [{"MessageId": "Base.1.12.Success"}]}, headers

    def create_job(self):
        jid = "JID_%012d" % (len(self.jobs) + 1)
        base = self.manager_path + "/Oem/Dell/Jobs"
        job = {"@odata.id": "%s/%s" % (base, jid), "Id": jid, "JobType": "BIOSConfiguration", "JobState": "Scheduled",
               "Message": "Task successfully scheduled.", "MessageId": "JCP001", "Name": "Configure: BIOS.Setup.1-1"}
        self.jobs[jid] = job
        self.docs[_key(job["@odata.id"])] = job
        listing = self.get(base)
        listing["Members"].append({"@odata.id": job["@odata.id"]})
        listing["Members@odata.count"] = len(listing["Members"])
        return job["@odata.id"]

    def reset(self):
        self.off_reads = 2
        scheduled = [j for j in self.jobs.values() if j["JobState"] == "Scheduled"]
        if self.dell and not scheduled:
            return
        self.current().update(self.settings())
        bios = self.get(self.bios_path)
        self.bump(bios)
        doc = self.get(self.settings_path)
        doc["Attributes"] = dict(self.current()) if self.full_settings else {}
        self.bump(doc)
        for job in scheduled:
            job.update(JobState="Completed", Message="Job completed successfully.", MessageId="PR19")

    def patches(self):
        return [r for r in self.requests if r[0] == "PATCH"]


class Handler(http.server.BaseHTTPRequestHandler):
    capture = None
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, body, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _auth(self):
        want = "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
        if self.headers.get("Authorization") != want:
            self._send(401, {"error": {"code": "Base.1.12.NoValidSession", "message": "Unauthorized"}},
                       {"WWW-Authenticate": 'Basic realm="capture"'})
            return False
        return True

    def _body(self):
        size = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(size) if size else b""
        return json.loads(raw or b"{}")

    def _log(self):
        cap = self.capture
        with cap.lock:
            cap.requests.append((self.command, urllib.parse.unquote(self.path), dict(self.headers)))

    def do_GET(self):
        self._log()
        if not self._auth():
            return
        cap = self.capture
        with cap.lock:
            doc = cap.get(self.path)
            if doc is None:
                return self._send(404, {"error": {"code": "Base.1.12.ResourceMissingAtURI",
                                                  "message": "No resource at %s" % self.path}})
            if _key(self.path) == _key(cap.settings_path) and cap.hide_etag > 0:
                cap.hide_etag -= 1
                return self._send(200, dict((k, v) for k, v in doc.items() if k != "@odata.etag"))
            if _key(self.path) == _key(cap.system_path) and cap.off_reads > 0:
                cap.off_reads -= 1
                doc = dict(doc, PowerState="Off")
            return self._send(200, doc, {"ETag": cap.etag(doc)})

    def do_PATCH(self):
        self._log()
        if not self._auth():
            return
        cap = self.capture
        body = self._body()
        with cap.lock:
            if _key(self.path) != _key(cap.settings_path):
                return self._send(405, {"error": {"code": "Base.1.12.OperationNotAllowed", "message": "read-only"}})
            status, reply, headers = cap.patch_settings(body, self.headers.get("If-Match"))
            return self._send(status, reply, headers)

    def do_POST(self):
        self._log()
        if not self._auth():
            return
        cap = self.capture
        body = self._body()
        with cap.lock:
            if _key(self.path) == _key(cap.reset_target):
                cap.reset()
                return self._send(204, None)
            if cap.dell and _key(self.path) == _key(cap.manager_path + "/Jobs"):
                if body.get("TargetSettingsURI") != cap.settings_path or not cap.pending():
                    return self._send(400, {"error": {"code": "IDRAC.2.8.SYS030", "message": "bad job request"}})
                return self._send(200, {}, {"Location": cap.create_job()})
            return self._send(405, {"error": {"code": "Base.1.12.OperationNotAllowed", "message": "no"}})


class Server:
    def __init__(self, capture, certs):
        handler = type("CaptureHandler", (Handler,), {"capture": capture})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.capture = capture
        self.baseurl = "https://127.0.0.1:%d" % self.httpd.server_address[1]
        self.ca = os.path.join(certs, "ca.pem")
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def conn(self, **extra):
        args = dict(baseurl=self.baseurl, username=USER, password=PASSWORD, ca_path=self.ca, timeout=10, retries=0)
        args.update(extra)
        return args

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                        "fixtures", "redfish")


def _servers(base, certs):
    """A factory start(folder, manufacturer=None) -> Server for the folders under base, and its servers."""
    servers = []

    def _start(folder, manufacturer=None):
        path = os.path.join(base, folder)
        if not os.path.isdir(path):  # both folders are in every checkout: a wrong name is the test's bug
            pytest.fail("capture %s is absent from %s" % (folder, base))
        server = Server(Capture(path, manufacturer), certs)
        servers.append(server)
        return server
    return _start, servers


@pytest.fixture
def capture_bmc(realdata, bmc_certs):
    """capture_bmc(folder, manufacturer=None) -> Server on 127.0.0.1 serving that real capture."""
    start, servers = _servers(os.path.join(realdata, "redfish"), bmc_certs)
    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def fixture_bmc(bmc_certs):
    """fixture_bmc(folder) -> Server on 127.0.0.1 serving tests/fixtures/redfish/<folder> (ours, no realdata needed)."""
    start, servers = _servers(FIXTURES, bmc_certs)
    yield start
    for server in servers:
        server.stop()

