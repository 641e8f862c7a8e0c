"""The gate's report files on the controller: written only when changed (the timestamp aside),
atomically; uploaded with PUT to a real HTTP server on loopback."""
import http.server
import json
import os
import threading

import pytest

from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.provision.plugins.plugin_utils import gate_reports

REPORT = {"status": "fail", "node": "gpu001", "profile": "hgx-h100", "failed": ["cpu.smt"],
          "counts": {"pass": 1, "fail": 1, "skip": 0, "error": 0},
          "checks": [{"id": "numa.layout", "status": "pass", "reason": "ok", "remedy": "BIOS: SNC4"},
                     {"id": "cpu.smt", "status": "fail", "reason": "1 thread per core", "remedy": "BIOS: enable HT"}]}


def test_written_once_then_unchanged_even_when_the_time_moves(tmp_path):
    folder = str(tmp_path / "gate")
    first = gate_reports.plan(folder, "gpu001", gate_reports.render(REPORT, {"schema": 1}, 1764400000))
    assert sorted(os.path.basename(p) for p in first) == ["gpu001.json", "gpu001.prom", "gpu001.xml"]
    assert set(gate_reports.write(first).values()) == {"written"}
    assert json.loads((tmp_path / "gate" / "gpu001.json").read_text())["report"]["failed"] == ["cpu.smt"]
    prom = (tmp_path / "gate" / "gpu001.prom").read_text()
    assert 'gpufleet_check{node="gpu001",check="cpu.smt"} 0\n' in prom
    assert prom.endswith('gpufleet_validate_report_timestamp_seconds{node="gpu001"} 1764400000\n'
                         '# HELP gpufleet_validate_last_run_timestamp_seconds Unix time the gate last evaluated the node '
                         '(every run: alert when it stops moving).\n'
                         '# TYPE gpufleet_validate_last_run_timestamp_seconds gauge\n'
                         'gpufleet_validate_last_run_timestamp_seconds{node="gpu001"} 1764400000\n')

    # later, other free space in the facts, the same report: the JSON and JUnit files stay, the .prom
    # file is refreshed: its verdicts and report timestamp as they were, the last run moved
    later = gate_reports.plan(folder, "gpu001", gate_reports.render(REPORT, {"schema": 1, "free": 7}, 1764400600))
    assert gate_reports.write(later) == {str(tmp_path / "gate" / "gpu001.json"): "unchanged",
                                         str(tmp_path / "gate" / "gpu001.prom"): "refreshed",
                                         str(tmp_path / "gate" / "gpu001.xml"): "unchanged"}
    assert (tmp_path / "gate" / "gpu001.prom").read_text() == prom.replace(
        'gpufleet_validate_last_run_timestamp_seconds{node="gpu001"} 1764400000',
        'gpufleet_validate_last_run_timestamp_seconds{node="gpu001"} 1764400600')

    green = dict(REPORT, status="pass", failed=[], checks=REPORT["checks"][:1])
    changed = gate_reports.write(gate_reports.plan(folder, "gpu001", gate_reports.render(green, {"schema": 1}, 1764401200)))
    assert changed == dict((str(tmp_path / "gate" / n), "written") for n in ("gpu001.json", "gpu001.prom", "gpu001.xml"))
    assert [n for n in os.listdir(folder) if n.startswith(".")] == []   # no temporary file left


def test_a_folder_that_is_a_file_is_named(tmp_path):
    (tmp_path / "gate").write_text("")
    with pytest.raises(OSError, match="report_dir %s: exists and is not a folder" % (tmp_path / "gate")):
        gate_reports.plan(str(tmp_path / "gate"), "gpu001", {"json": "{}"})


class _Sink(http.server.BaseHTTPRequestHandler):
    stored = {}

    def do_PUT(self):  # noqa: N802 (the http.server interface)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith(".xml") and self.headers.get("X-Token") != "t0k":
            self.send_response(403)
        else:
            self.stored[self.path] = (self.headers["Content-Type"], body.decode())
            self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def sink():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d/gate/" % server.server_port
    server.shutdown()


def test_upload_puts_each_file_and_names_a_refusal(sink):
    files = gate_reports.render(REPORT, {"schema": 1}, 1764400000)
    done = gate_reports.upload(sink, "gpu001", files, open_url, headers={"X-Token": "t0k"})
    assert sorted(done) == [sink + "gpu001.json", sink + "gpu001.prom", sink + "gpu001.xml"]
    assert _Sink.stored["/gate/gpu001.prom"] == ("text/plain; version=0.0.4", files["prom"])
    assert _Sink.stored["/gate/gpu001.json"][0] == "application/json"
    with pytest.raises(RuntimeError, match=r"PUT %sgpu001.xml failed: HTTP 403" % sink):
        gate_reports.upload(sink, "gpu001", files, open_url)


def test_a_write_that_fails_names_the_path_and_leaves_no_temporary_file(tmp_path):
    # the target's parent is a regular file: ENOTDIR, whatever the permissions (the tests run as root)
    (tmp_path / "gate").write_text("")
    target = str(tmp_path / "gate" / "sub" / "gpu001.json")
    with pytest.raises(OSError, match="gpu001.json: cannot make its folder"):
        gate_reports.write({target: "{}\n"})
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "gpu001.json").mkdir()                     # a folder where the report goes
    with pytest.raises(OSError, match="gpu001.json: cannot write, it is a folder"):
        gate_reports.write({str(folder / "gpu001.json"): "{}\n"})
    assert sorted(os.listdir(str(tmp_path))) == ["gate", "reports"] and os.listdir(str(folder)) == ["gpu001.json"]


@pytest.mark.parametrize("node", ["../../etc/x", "a/b", "..", "", None, "gpu 001", "gpu001\n"])
def test_a_node_name_that_is_no_file_name_writes_nothing(tmp_path, node):
    with pytest.raises(OSError, match="cannot name a report file"):
        gate_reports.plan(str(tmp_path), node, {"json": "{}\n"})
    with pytest.raises(RuntimeError, match="cannot name a report file"):
        gate_reports.upload("http://127.0.0.1:9/r", node, {"json": "{}\n"}, open_url=None)
    assert os.listdir(str(tmp_path)) == []


def test_a_report_path_that_is_a_fifo_is_named_not_read(tmp_path):
    os.mkfifo(str(tmp_path / "gpu001.json"))
    with pytest.raises(OSError, match="gpu001.json: exists and is not a regular file"):
        gate_reports.plan(str(tmp_path), "gpu001", {"json": "{}\n"})
