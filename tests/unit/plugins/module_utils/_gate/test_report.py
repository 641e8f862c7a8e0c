"""JUnit XML and Prometheus textfile rendering of a validation report."""
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import report as _report

REPORT = {
    "status": "fail", "node": 'node"01', "profile": "hgx-h100", "failed": ["kernel.cmdline", "pcie.acs"],
    "counts": {"pass": 1, "fail": 1, "error": 1, "skip": 1},
    "checks": [
        {"id": "os.release", "status": "pass", "observed": {"ID": "ubuntu"}, "expected": {"ID": "ubuntu"}, "reason": "ok",
         "prevents": "p", "remedy": "r"},
        {"id": "kernel.cmdline", "status": "fail", "observed": {"raw": "a <b> & c"}, "expected": None,
         "reason": "hugepages=16 (proc/cmdline) has no hugepagesz= before it", "prevents": "p", "remedy": "fix <grub>"},
        {"id": "pcie.acs", "status": "error", "observed": None, "expected": None,
         "reason": "sys/bus/pci/devices/0000:17:00.0/config: short (unreadable)", "prevents": "p", "remedy": "r"},
        {"id": "transport.nccl", "status": "skip", "observed": None, "expected": None, "reason": "not in profile", "prevents": "p",
         "remedy": "r"},
    ],
}


def test_junit_has_one_testcase_per_check_with_the_right_element():
    root = ET.fromstring(_report.junit(REPORT))
    suite = root.find("testsuite")
    assert suite.get("name") == 'node"01'
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("4", "1", "1", "1")
    cases = dict((c.get("name"), c) for c in suite.findall("testcase"))
    assert list(cases) == ["os.release", "kernel.cmdline", "pcie.acs", "transport.nccl"]
    failure = cases["kernel.cmdline"].find("failure")
    assert failure.get("message").startswith("hugepages=16")
    assert "a <b> & c" in failure.text and "fix <grub>" in failure.text
    assert cases["pcie.acs"].find("error") is not None
    assert cases["transport.nccl"].find("skipped").get("message") == "not in profile"
    assert cases["os.release"].find("failure") is None


def test_prometheus_textfile_format():
    text = _report.prometheus(REPORT, 1764400000.7)
    sample = re.compile(r'^[a-z_]+\{([a-z]+="(?:[^"\\]|\\.)*",?)+\} -?\d+$')
    for line in text.splitlines():
        assert line.startswith("# ") or sample.match(line), line
    assert 'gpufleet_check{node="node\\"01",check="os.release"} 1' in text
    assert 'gpufleet_check{node="node\\"01",check="kernel.cmdline"} 0' in text
    assert 'gpufleet_check{node="node\\"01",check="pcie.acs"} 0' in text
    assert 'gpufleet_check{node="node\\"01",check="transport.nccl"}' not in text
    assert 'gpufleet_check_skipped{node="node\\"01",check="transport.nccl"} 1' in text
    assert 'gpufleet_node_ready{node="node\\"01",profile="hgx-h100"} 0' in text
    assert 'gpufleet_validate_report_timestamp_seconds{node="node\\"01"} 1764400000\n' in text
    assert text.endswith('gpufleet_validate_last_run_timestamp_seconds{node="node\\"01"} 1764400000\n')


def test_summary_line_names_failing_checks():
    line = _report.summary(REPORT)
    assert line == 'node"01 QUARANTINE (profile hgx-h100): kernel.cmdline, pcie.acs [1 pass, 1 fail, 1 error, 1 skip]'
    assert _report.summary(dict(REPORT, status="pass")).startswith('node"01 READY (profile hgx-h100)')


def test_details_name_reason_and_remedy_of_red_checks_only():
    assert _report.details(REPORT) == [
        "kernel.cmdline FAIL: hugepages=16 (proc/cmdline) has no hugepagesz= before it -> fix: fix <grub>",
        "pcie.acs ERROR: sys/bus/pci/devices/0000:17:00.0/config: short (unreadable) -> fix: r",
    ]


def test_compact_result_carries_each_red_check_once_without_observed_values():
    out = _report.compact(REPORT)
    assert out["red"] == [
        {"id": "kernel.cmdline", "status": "fail", "reason": "hugepages=16 (proc/cmdline) has no hugepagesz= before it",
         "remedy": "fix <grub>"},
        {"id": "pcie.acs", "status": "error", "reason": "sys/bus/pci/devices/0000:17:00.0/config: short (unreadable)", "remedy": "r"},
    ]
    assert sorted(out) == ["checks", "counts", "failed_checks", "node", "profile", "red", "status", "summary"]
    assert out["checks"] == {"os.release": "pass", "kernel.cmdline": "fail", "pcie.acs": "error", "transport.nccl": "skip"}
