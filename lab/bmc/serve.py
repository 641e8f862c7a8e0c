"""One lab BMC: sushy-emulator (fake driver) with a vendor-flavoured BIOS in front of it.

    python -m lab.bmc.serve --name twin1 --flavour dell --port 8441 --state-dir DIR \
        --cert CERT --key KEY --htpasswd FILE [--reset-hook CMD] [--fail-first N] [--reset-seconds S]

Extension points used (sushy-tools 2.2.0): the Flask ``app`` of sushy_tools.emulator.main is
configured in-process; a ``before_request`` hook answers the vendor paths (Bios, its settings
object, the attribute registry, Dell's Manager and Jobs, SessionService) before sushy's own routes;
the ``system_resource`` and ``system_reset_action`` view functions are wrapped (Manufacturer and
the Bios link added; pending applied on reset); the fake driver is subclassed so that a reset can
take a fixed time. Everything else (power, managers, chassis, basic auth) is sushy's.
"""
import argparse
import json
import os
import secrets
import shlex
import ssl
import subprocess
import sys
import threading
import time

import flask

from lab.bmc import model

# Imported after argument parsing in main(): sushy reads SUSHY_EMULATOR_CONFIG at import time.
sushy_main = None


def _json(data, status=200, headers=None):
    return flask.Response(json.dumps(data, indent=2), status=status, content_type="application/json",
                          headers=headers or {})


def _error(exc):
    return _json(exc.body(), exc.status)


def make_driver(base, reset_seconds):
    """Fake driver whose resets take ``reset_seconds`` (sushy's own: a random 1-11 s)."""

    class TwinDriver(base):
        def set_power_state(self, identity, state):
            if reset_seconds is None:
                return super().set_power_state(identity, state)
            system = self._get(identity)
            if "On" in state:
                pending_state = "On"
            elif state in ("ForceOff", "GracefulShutdown"):
                pending_state = "Off"
            elif "Restart" in state:
                system["power_state"] = "Off"
                pending_state = state
            else:
                return super().set_power_state(identity, state)
            if system["power_state"] != pending_state:
                self._update(system, pending_power={"power_state": pending_state,
                                                    "apply_time": time.time() + reset_seconds})

    return TwinDriver


class FaultAndSessionMiddleware:
    """Outermost WSGI layer: injected 503s, and Redfish sessions (X-Auth-Token) next to basic auth."""

    def __init__(self, auth_app, inner_app, bios, fail_first, htpasswd):
        self.auth_app = auth_app      # sushy's basic-auth middleware wrapping Flask
        self.inner_app = inner_app    # Flask without auth, for requests carrying a valid session token
        self.bios = bios
        self.fail_left = fail_first
        self.htpasswd = htpasswd
        self.tokens = {}
        self.lock = threading.Lock()

    def _reply(self, start_response, status, body, headers=()):
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))] + list(headers))
        return [data]

    def __call__(self, env, start_response):
        with self.lock:
            fail = self.fail_left > 0
            if fail:
                self.fail_left -= 1
        if fail or self.bios.take_503():
            return self._reply(start_response, "503 Service Unavailable",
                               {"error": {"code": "Base.1.12.ServiceTemporarilyUnavailable",
                                          "message": "The service is temporarily unavailable (injected fault)."}},
                               [("Retry-After", "1")])
        path = env.get("PATH_INFO", "").rstrip("/")
        method = env.get("REQUEST_METHOD")
        if path == "/redfish/v1/SessionService/Sessions" and method == "POST":
            return self._login(env, start_response)
        token = env.get("HTTP_X_AUTH_TOKEN")
        if token:
            with self.lock:
                known = token in self.tokens
            if not known:
                return self._reply(start_response, "401 Unauthorized",
                                   {"error": {"code": "Base.1.12.NoValidSession",
                                              "message": "There is no valid session established with the implementation."}})
            if method == "DELETE" and path.startswith("/redfish/v1/SessionService/Sessions/"):
                with self.lock:
                    sid = path.rsplit("/", 1)[1]
                    if self.tokens.get(token) == sid:
                        del self.tokens[token]
                start_response("204 No Content", [])
                return [b""]
            return self.inner_app(env, start_response)
        return self.auth_app(env, start_response)

    def _login(self, env, start_response):
        from sushy_tools import error as sushy_error
        from sushy_tools.emulator import auth_basic
        try:
            size = int(env.get("CONTENT_LENGTH") or 0)
            body = json.loads(env["wsgi.input"].read(size) or b"{}")
            user, password = body["UserName"], body["Password"]
            auth_basic.authenticate(self.htpasswd, user, password.encode())
        except (ValueError, KeyError, TypeError, AttributeError):
            return self._reply(start_response, "400 Bad Request",
                               {"error": {"code": "Base.1.12.PropertyMissing", "message": "UserName and Password are required."}})
        except sushy_error.FishyError:
            return self._reply(start_response, "401 Unauthorized",
                               {"error": {"code": "Base.1.12.ResourceAtUriUnauthorized", "message": "Invalid credentials."}})
        token = secrets.token_hex(16)
        sid = secrets.token_hex(4)
        with self.lock:
            self.tokens[token] = sid
        uri = "/redfish/v1/SessionService/Sessions/" + sid
        return self._reply(start_response, "201 Created", {"@odata.id": uri, "Id": sid, "UserName": user},
                           [("X-Auth-Token", token), ("Location", uri)])


def _sushy_app(args, flavour, bios):
    """sushy's Flask app, configured in-process for one fake system whose resets take a fixed time."""
    global sushy_main
    sushy_dir = os.path.join(bios.dir, "sushy")
    os.makedirs(sushy_dir, exist_ok=True)
    # The fake driver persists its systems in sqlite; bios.json is our source of truth for power.
    for leftover in ("fakedriver.sqlite", "fakedriver.sqlite-wal", "fakedriver.sqlite-shm"):
        if os.path.exists(os.path.join(sushy_dir, leftover)):
            os.unlink(os.path.join(sushy_dir, leftover))
    from sushy_tools.emulator import main as sushy_main
    from sushy_tools.emulator.resources.systems import fakedriver
    fakedriver.FakeDriver = make_driver(fakedriver.FakeDriver, args.reset_seconds)
    app = sushy_main.app
    app.configure(extra_config={
        "SUSHY_EMULATOR_FAKE_DRIVER": True,
        "SUSHY_EMULATOR_STATE_DIR": sushy_dir,
        "SUSHY_EMULATOR_FAKE_SYSTEMS": [{"uuid": flavour["system_id"], "name": args.name, "power_state": bios.power,
                                         "external_notifier": False, "nics": []}],
        "SUSHY_EMULATOR_AUTH_FILE": args.htpasswd,
    })
    return app


def _key(path):
    # BMCs match paths without case and trailing slash (HPE links /redfish/v1/systems/1/bios/)
    return path.rstrip("/").lower()


class VendorResources:
    """The resources sushy lacks, as the flavour's vendor serves them: Bios, its settings object, the
    attribute registry, and (Dell) a manager of its own with Jobs."""

    def __init__(self, flavour, bios):
        self.flavour = flavour
        self.bios = bios
        self.reg = flavour["registry"]
        # Dell: jobs are listed under the manager's Links.Oem.Dell.Jobs (iDRAC 6/9) and created by a
        # POST to <manager>/Jobs, which every public client uses; the lab answers both.
        self.jobs_post = "/redfish/v1/Managers/%s/Jobs" % flavour["manager_id"]
        self.jobs_uri = flavour.get("jobs_link") or self.jobs_post
        # Dell: iDRAC.Embedded.1 is not sushy's system-backed manager
        self.own_manager = flavour["manager_id"] != flavour["system_id"]

    def routes(self):
        """{normalised path: handler} for the paths answered before sushy's own routes."""
        flavour = self.flavour
        routes = {
            _key(flavour["bios_path"]): self.bios_resource,
            _key(flavour["settings_path"]): self.settings_resource,
            _key("/redfish/v1/Registries"): self.registries,
            _key(self.reg["file_path"]): self.registry_file,
            _key(self.reg["uri"]): self.registry,
        }
        if self.own_manager:
            routes[_key("/redfish/v1/Managers")] = self.managers
            routes[_key("/redfish/v1/Managers/%s" % flavour["manager_id"])] = self.manager
        if flavour.get("config_job"):
            routes[_key(self.jobs_uri)] = self.jobs
            routes[_key(self.jobs_post)] = self.jobs
        return routes

    def job_at(self, path):
        """A Dell job resource under either jobs path, None for any other path."""
        if not self.flavour.get("config_job"):
            return None
        if not (path.startswith(_key(self.jobs_uri) + "/") or path.startswith(_key(self.jobs_post) + "/")):
            return None
        job = self.bios.jobs.get(flask.request.path.rstrip("/").rsplit("/", 1)[1])
        if job is None:
            return _error(model.BmcError(404, "Base.1.12.ResourceMissingAtURI", "No job at %s." % path))
        return _json(job)

    def bios_resource(self):
        flavour, bios = self.flavour, self.bios
        settings = {"@odata.type": "#Settings.v1_3_5.Settings",
                    "SettingsObject": {"@odata.id": flavour["settings_path"]}}
        if flavour["supported_apply_times"]:
            settings["SupportedApplyTimes"] = flavour["supported_apply_times"]
        etag = bios.etag()
        return _json({"@odata.id": flavour["bios_path"], "@odata.type": "#Bios.v1_2_1.Bios", "Id": "Bios",
                      "@odata.etag": etag, "Name": "BIOS Configuration Current Settings", "AttributeRegistry": self.reg["id"],
                      "Attributes": dict(bios.current), "@Redfish.Settings": settings}, headers={"ETag": etag})

    def settings_attributes(self):
        # Lenovo Bios/Pending, HPE bios/settings, AMI Bios/SD show every attribute; Dell only pending ones
        if self.flavour.get("settings_full"):
            return dict(self.bios.current, **self.bios.pending)
        return dict(self.bios.pending)

    def settings_resource(self):
        req = flask.request
        etag = self.bios.etag()
        if req.method == "GET":
            return _json({"@odata.id": self.flavour["settings_path"], "@odata.type": "#Bios.v1_2_1.Bios", "Id": "Settings",
                          "@odata.etag": etag, "Name": "BIOS Configuration Pending Settings",
                          "AttributeRegistry": self.reg["id"], "Attributes": self.settings_attributes()},
                         headers={"ETag": etag})
        if req.method != "PATCH":
            return _error(model.BmcError(405, "Base.1.12.OperationNotAllowed", "Use GET or PATCH on %s." % req.path))
        try:
            apply_time = self._checked_patch(req, etag)
            self.bios.patch(req.get_json(silent=True).get("Attributes"))
            if self.flavour.get("config_job") and apply_time == "OnReset":
                # iDRAC creates the BIOS config job itself when the PATCH names OnReset.
                job = self.bios.create_job(self.jobs_uri, self.flavour["settings_path"])
                return _json({"@Message.ExtendedInfo": [{"MessageId": "Base.1.12.Success", "Message": "Job created."}]},
                             202, {"Location": job["@odata.id"]})
        except model.BmcError as exc:
            return _error(exc)
        if self.flavour.get("config_job"):
            return _json({"@Message.ExtendedInfo": [{
                "MessageId": "SYS011", "Message": "Pending configuration values; create a configuration job to apply them."}]})
        return flask.Response(status=204)

    def _checked_patch(self, req, etag):
        """The PATCH's ApplyTime, once its precondition and body are what the vendor accepts (else BmcError)."""
        if_match = req.headers.get("If-Match")
        if if_match is None and self.flavour.get("if_match") == "required":
            # AMI: "A precondition header or annotation is required to change this resource."
            raise model.BmcError(428, "Base.1.12.PreconditionRequired",
                                 "A precondition header or annotation is required to change this resource.")
        if if_match is not None and if_match not in (etag, "*"):
            raise model.BmcError(412, "Base.1.12.PreconditionFailed",
                                 "The ETag supplied did not match the ETag required to change this resource.")
        body = req.get_json(silent=True)
        if not isinstance(body, dict):
            raise model.BmcError(400, "Base.1.12.MalformedJSON", "The request body is not a JSON object.")
        unknown = sorted(set(body) - {"Attributes", "@Redfish.SettingsApplyTime"})
        if unknown:
            raise model.BmcError(400, "Base.1.12.PropertyUnknown", "Unknown properties: %s." % ", ".join(unknown))
        apply_time = (body.get("@Redfish.SettingsApplyTime") or {}).get("ApplyTime")
        supported = self.flavour["supported_apply_times"]
        if "@Redfish.SettingsApplyTime" in body and apply_time not in supported:
            raise model.BmcError(400, "Base.1.12.PropertyValueNotInList",
                                 "ApplyTime %r is not supported (supported: %s)." % (apply_time, supported))
        return apply_time

    def registries(self):
        return _json({"@odata.id": "/redfish/v1/Registries", "Name": "Registry File Collection",
                      "@odata.type": "#MessageRegistryFileCollection.MessageRegistryFileCollection",
                      "Members": [{"@odata.id": "/redfish/v1/Registries/Messages"}, {"@odata.id": self.reg["file_path"]}],
                      "Members@odata.count": 2})

    def registry_file(self):
        # As captured: Dell's member is ...v1_0_0 while the Bios names ...v1_0_3, its Location the Bios/BiosRegistry
        reg = self.reg
        language = reg.get("language", "en")
        return _json({"@odata.id": reg["file_path"], "@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
                      "Id": reg.get("file_id") or reg["file_path"].rsplit("/", 1)[1], "Name": "BIOS Attribute Registry File",
                      "Registry": reg.get("file_registry") or reg["id"], "Languages": [language],
                      "Location": [{"Language": language, "Uri": reg["uri"]}]})

    def registry(self):
        return _json(model.registry_document(self.flavour))

    def managers(self):
        return _json({"@odata.id": "/redfish/v1/Managers", "Name": "Manager Collection",
                      "Members": [{"@odata.id": "/redfish/v1/Managers/%s" % self.flavour["manager_id"]}],
                      "Members@odata.count": 1})

    def manager(self):
        flavour = self.flavour
        links = {"ManagerForServers": [{"@odata.id": "/redfish/v1/Systems/%s" % flavour["system_id"]}]}
        if flavour.get("config_job"):
            links["Oem"] = {"Dell": {"Jobs": {"@odata.id": self.jobs_uri}}}
        return _json({"@odata.id": "/redfish/v1/Managers/%s" % flavour["manager_id"], "Id": flavour["manager_id"],
                      "@odata.type": "#Manager.v1_3_1.Manager", "ManagerType": "BMC", "Name": "Manager",
                      "Status": {"State": "Enabled", "Health": "OK"}, "Links": links})

    def jobs(self):
        if flask.request.method == "POST":
            body = flask.request.get_json(silent=True) or {}
            try:
                job = self.bios.create_job(self.jobs_uri, body.get("TargetSettingsURI"))
            except model.BmcError as exc:
                return _error(exc)
            return _json({}, 200, {"Location": job["@odata.id"]})
        return _json({"@odata.id": self.jobs_uri, "Name": "Jobs",
                      "Members": [{"@odata.id": j["@odata.id"]} for j in self.bios.jobs.values()],
                      "Members@odata.count": len(self.bios.jobs)})


class SushyViews:
    """sushy's own views, wrapped: the system gains the vendor's identity and Bios link, a reset applies
    the pending BIOS (and the reset hook), the service root gains sessions and registries."""

    def __init__(self, app, args, vendor):
        self.app = app
        self.args = args
        self.vendor = vendor
        self.bios = vendor.bios
        self.flavour = vendor.flavour
        self.original = dict((name, app.view_functions[name])
                             for name in ("root_resource", "system_resource", "system_reset_action"))

    def install(self):
        for name in self.original:
            self.app.view_functions[name] = getattr(self, name)

    def sync_power(self):
        try:
            self.bios.set_power(self.app.systems.get_power_state(self.flavour["system_id"]))
        except Exception:  # noqa: BLE001 - power sync is best effort, never fails a request
            pass

    def system_resource(self, identity):
        response = self.original["system_resource"](identity)
        if flask.request.method != "GET" or response.status_code != 200:
            return response
        flavour = self.flavour
        data = json.loads(response.get_data())
        data.update(Manufacturer=flavour["manufacturer"], Model=flavour["model"],
                    BiosVersion=flavour["bios_version"], Bios={"@odata.id": flavour["bios_path"]})
        if self.vendor.own_manager:
            data.setdefault("Links", {})["ManagedBy"] = [{"@odata.id": "/redfish/v1/Managers/%s" % flavour["manager_id"]}]
        return _json(data)

    def system_reset_action(self, identity):
        reset_type = (flask.request.get_json(silent=True) or {}).get("ResetType")
        was_power = self.app.systems.get_power_state(identity)
        if reset_type in ("GracefulRestart", "GracefulShutdown") and self.bios.fault("ignore_graceful"):
            # A hung OS: the BMC accepts the graceful request and nothing happens.
            return flask.Response(status=204)
        response = self.original["system_reset_action"](identity)
        if response.status_code < 300:
            self.bios.reset(reset_type, was_power)
            self.sync_power()
            run_hook(self.args, self.bios)
            # sushy applies the power transition lazily, on the next read: keep bios.json's
            # "power" true even when no client polls during the reset.
            threading.Thread(target=self.follow_power, daemon=True).start()
        return response

    def follow_power(self):
        deadline = time.monotonic() + (self.args.reset_seconds if self.args.reset_seconds is not None else 11) + 2
        while time.monotonic() < deadline:
            time.sleep(0.25)
            self.sync_power()

    def root_resource(self):
        # sushy's root has no SessionService; ours accepts sessions (FaultAndSessionMiddleware).
        response = self.original["root_resource"]()
        data = json.loads(response.get_data())
        data["SessionService"] = {"@odata.id": "/redfish/v1/SessionService"}
        data.setdefault("Links", {})["Sessions"] = {"@odata.id": "/redfish/v1/SessionService/Sessions"}
        data["Registries"] = {"@odata.id": "/redfish/v1/Registries"}
        return _json(data)


def build_app(args):
    flavour = model.load_flavour(args.flavour)
    bios = model.BiosModel(flavour, args.state_dir, args.name)
    app = _sushy_app(args, flavour, bios)
    vendor = VendorResources(flavour, bios)
    routes = vendor.routes()
    views = SushyViews(app, args, vendor)
    views.install()

    @app.before_request
    def vendor_routes():
        path = _key(flask.request.path)
        handler = routes.get(path)
        if handler is not None:
            with bios.lock:
                return handler()
        return vendor.job_at(path)

    @app.after_request
    def keep_power(response):
        views.sync_power()
        return response

    auth_app = app.wsgi_app
    app.wsgi_app = FaultAndSessionMiddleware(auth_app, getattr(auth_app, "app", auth_app), bios,
                                             args.fail_first, args.htpasswd)
    return app, bios


def run_hook(args, bios):
    """Run `--reset-hook CMD name` without waiting; its output goes to <state-dir>/<name>/reset-hook.log."""
    if not args.reset_hook:
        return
    log = open(os.path.join(bios.dir, "reset-hook.log"), "ab")
    proc = subprocess.Popen(shlex.split(args.reset_hook) + [args.name], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    threading.Thread(target=proc.wait, daemon=True).start()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.bmc.serve", description=__doc__.split("\n")[0])
    parser.add_argument("--name", required=True, help="twin name: state goes to <state-dir>/<name>/")
    parser.add_argument("--flavour", required=True, choices=model.FLAVOURS)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--htpasswd", required=True, help="bcrypt htpasswd file (python -m lab.bmc.certs)")
    parser.add_argument("--reset-hook", help="command run as `CMD <name>` after every ComputerSystem.Reset")
    parser.add_argument("--fail-first", type=int, default=0, help="answer the first N requests with 503")
    parser.add_argument("--reset-seconds", type=float, default=None,
                        help="time a reset keeps the system Off (default: sushy's random 1-11 s)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    for path in (args.cert, args.key, args.htpasswd):
        if not os.path.isfile(path):
            sys.exit("lab.bmc.serve: %s: no such file" % path)
    try:
        app, _ = build_app(args)
    except ValueError as exc:
        sys.exit("lab.bmc.serve: %s" % exc)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    # 127.0.0.1 only: the lab never exposes a BMC beyond loopback.
    app.run(host="127.0.0.1", port=args.port, ssl_context=context, threaded=True, use_reloader=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
