"""The end-of-run summary: what an operator reads, from the variables the roles leave per host.
Inputs are written here by hand in the shape the roles set them (validate_node's report, the reboot
facts of the shared contract, the failures callback's record, the fabric role's result)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import summary


def report(status, failing=()):
    """validate_node's result as the role registers it (the compact form, no whole report)."""
    red = [{"id": check_id, "status": "fail", "reason": "%s is wrong" % check_id, "remedy": remedy}
           for check_id, remedy in failing]
    checks = dict([("numa.layout", "pass")] + [(c, "fail") for c, _r in failing])
    return {"status": status, "profile": "hgx-h100", "checks": checks, "red": red,
            "failed_checks": [c for c, _r in failing]}


HOSTVARS = {
    "gpu001": {"__validate_result": report("pass"), "gpufleet_rebooted": True,
               "gpufleet_reboot_requests": [{"role": "bios", "reason": "BIOS settings pending"}],
               "validate_report_dir": "/srv/reports", "validate_report_url": "https://u:secret@sink.example/gate/"},
    "gpu002": {"__validate_result": report("fail", [("cpu.smt", "BIOS: enable hyper-threading"),
                                                    ("memory.thp", "transparent_hugepage=never")])},
    "gpu003": {"__validate_result": report("fail", [("cpu.smt", "BIOS: enable hyper-threading")]),
               "gpufleet_reboot_required": True},
    "gpu004": {"gpufleet_failure": {"task": "gpufleet.provision.bios : Apply the BIOS settings", "msg": "BMC 10.0.0.5: 401"}},
    "localhost": {"fabric_dest": "/srv/fabric",
                  "__fabric_result": {"summary": {"anomalies": {"miscabled_rail": 2, "link_missing": 1}}}},
}
NODES = ["gpu001", "gpu002", "gpu003", "gpu004"]


def test_one_line_per_status_and_one_remedy_per_check():
    out = summary.run_summary(HOSTVARS, NODES, ["gpu001", "gpu002", "gpu003"])
    lines = out["lines"]
    assert lines[0] == "gpufleet summary: 4 node(s): READY 1, QUARANTINED 2, FAILED 1; rebooted 1"
    assert lines[1] == "READY        gpu001"
    assert lines[2] == "QUARANTINED  gpu002: cpu.smt, memory.thp"
    assert lines[3] == "             gpu003: cpu.smt"
    assert lines[4] == "FAILED       gpu004: task 'gpufleet.provision.bios : Apply the BIOS settings': BMC 10.0.0.5: 401"
    assert "  cpu.smt: gpu[002-003] -> BIOS: enable hyper-threading" in lines
    assert "  memory.thp: gpu002 -> transparent_hugepage=never" in lines
    assert "Reboots      gpu001 (bios: BIOS settings pending); pending, not allowed: gpu003" in lines
    where = [line for line in lines if line.startswith("Run folder")][0]
    assert "/srv/reports/<node>.json|.xml|.prom" in where
    assert "/srv/fabric/ (fabric.json, topology.conf, topology-block.conf, labels.json, nccl.json, summary.txt)" in where
    per_node = dict(HOSTVARS, localhost=dict(HOSTVARS["localhost"], fabric_per_node_files=True))
    where = [line for line in summary.run_summary(per_node, NODES, NODES)["lines"] if line.startswith("Run folder")][0]
    assert "labels.json, nccl.json, labels/, nccl/, summary.txt)" in where
    assert "secret" not in where and "https://sink.example/gate/" in where       # no credentials in the URL shown
    assert lines[-1] == "Fabric       3 anomalies: link_missing 1, miscabled_rail 2"


def test_stats_for_the_job_artifacts():
    stats = summary.run_summary(HOSTVARS, NODES, ["gpu001", "gpu002", "gpu003"])["stats"]
    assert stats["counts"] == {"READY": 1, "QUARANTINED": 2, "FAILED": 1, "NOT GATED": 0}
    assert stats["quarantined"] == {"gpu002": ["cpu.smt", "memory.thp"], "gpu003": ["cpu.smt"]}
    assert stats["failed"] == {"gpu004": {"task": "gpufleet.provision.bios : Apply the BIOS settings", "msg": "BMC 10.0.0.5: 401"}}
    assert stats["rebooted"] == ["gpu001"] and stats["reboot_pending"] == ["gpu003"]


def test_converged_nodes_are_ready_and_counted_apart():
    hostvars = {"gpu001": {"__validate_result": dict(report("pass"), converged=True)},
                "gpu002": {"__validate_result": dict(report("pass"), converged=True)},
                "gpu003": {"__validate_result": report("pass"), "gpufleet_rebooted": True}}
    out = summary.run_summary(hostvars, ["gpu001", "gpu002", "gpu003"])
    assert out["lines"][0] == "gpufleet summary: 3 node(s): READY 3, QUARANTINED 0, FAILED 0; rebooted 1; converged 2 (nothing washed)"
    assert out["stats"]["converged"] == ["gpu001", "gpu002"] and out["stats"]["ready"] == ["gpu001", "gpu002", "gpu003"]
    assert summary.run_summary(HOSTVARS, NODES)["stats"]["converged"] == []


def test_a_node_gone_without_a_recorded_cause_is_failed_and_says_where_to_look():
    out = summary.run_summary({"gpu001": {}}, ["gpu001"], [])
    assert out["lines"][3].startswith("FAILED       gpu001: task 'unknown task': see the failed task above")


def test_a_rescued_failure_does_not_make_an_active_node_failed():
    hostvars = {"gpu001": dict(HOSTVARS["gpu001"], gpufleet_failure={"task": "x", "msg": "rescued"})}
    assert summary.run_summary(hostvars, ["gpu001"], ["gpu001"])["stats"]["counts"]["READY"] == 1


def test_without_gate_or_fabric_it_says_so():
    lines = summary.run_summary({"gpu001": {}}, ["gpu001"], ["gpu001"])["lines"]
    assert "NOT GATED    gpu001: no gate result (the gate did not run on it)" in lines
    assert lines[-1] == "Fabric       not built in this run"
    assert "Run folder   none given (no report sink)" in lines


def test_a_fleet_names_twenty_nodes_per_status_then_counts():
    hostvars = {"n%03d" % i: {"__validate_result": report("fail", [("cpu.smt", "fix")])} for i in range(50)}
    lines = summary.run_summary(hostvars, sorted(hostvars), sorted(hostvars))["lines"]
    assert sum(1 for line in lines if ": cpu.smt" in line and line.strip().startswith(("QUARANTINED", "n0"))) == 20
    assert "             and 30 more: n[020-049]" in lines


def test_reboot_role_result_counts_when_the_shared_fact_is_absent():
    hostvars = {"gpu001": {"__validate_result": report("pass"), "__reboot_result": {"rebooted": True, "changed": True}}}
    assert summary.run_summary(hostvars, ["gpu001"])["stats"]["rebooted"] == ["gpu001"]


def test_anomalies_counted_from_the_list_when_there_is_no_summary():
    hostvars = {"gpu001": {}, "localhost": {"__fabric_result": {"anomalies": [{"kind": "missing_rail"}, {"kind": "missing_rail"}]}}}
    assert summary.run_summary(hostvars, ["gpu001"])["stats"]["anomalies"] == {"missing_rail": 2}


def test_nodes_must_be_a_list():
    with pytest.raises(AnsibleFilterError, match="nodes must be a list"):
        summary.run_summary({}, "gpu001")


def test_gate_summary_counts_green_as_a_hostlist_and_details_red_checks():
    results = [dict(report("pass"), node="gpu001", summary="gpu001 READY (profile hgx-h100): 40 pass"),
               dict(report("pass"), node="gpu002", summary="gpu002 READY (profile hgx-h100): 40 pass"),
               dict(report("fail", [("pcie.acs", "setpci ...")]), node="gpu003",
                    summary="gpu003 QUARANTINE (profile hgx-h100): pcie.acs [39 pass, 1 fail]"),
               {"failed": True, "msg": "unreachable before the gate"}]
    assert summary.gate_summary(results) == [
        "3 node(s) evaluated: 2 green, 1 red",
        "green: gpu[001-002]",
        "gpu003 QUARANTINE (profile hgx-h100): pcie.acs [39 pass, 1 fail]",
        "pcie.acs FAIL: pcie.acs is wrong -> fix: setpci ...",
    ]
    assert summary.gate_summary(results, details=False)[-1] == "gpu003 QUARANTINE (profile hgx-h100): pcie.acs [39 pass, 1 fail]"
    assert summary.gate_summary([]) == ["0 node(s) evaluated: 0 green, 0 red"]
    with pytest.raises(AnsibleFilterError, match="gate_summary: expected a list of validate_node results, got str"):
        summary.gate_summary("gpu001")
