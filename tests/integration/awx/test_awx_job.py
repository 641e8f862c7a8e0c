"""provision.yml and validate.yml as AWX runs them (issue 14, items 1, 5, 7): a project checkout with
its own ansible.cfg and collections/requirements.yml, an inventory, extra variables with a vaulted BMC
password, ansible-runner, artifacts. Checks the job status, the job events (what AWX stores per node),
the summary in the job's artifacts, the report sinks, and that no secret appears in any artifact."""
import json
import os

import yaml

# What one node may cost in job events (AWX keeps every event in its database). Before issue 14 a
# validate run stored 350-570 KB per node: the loop items carried the report, the module result the
# fact tree. Every event costs about 1.2 KB of AWX metadata whatever it carries.
# The gate: one validate_node call per node, its result compact (#16: 40 KB per node is the goal,
# measured 23 KB average and 39 KB for the reddest of 8 fixture nodes in benchmarks/fleet_bench.py;
# 133-139 KB before). A red twin prints every red check's reason and remedy once.
GATE_BYTES_PER_NODE = 60 * 1024
# The whole provision job (ten roles, the reboot, every verify, the gate): 1.77 MB per node before
# #16 (each verify returned the whole report, a package list and the fact tree); the roles' own
# task results are most of what is left (docs/operator-guide.md, "Sizing AWX for a fleet").
EVENT_BYTES_PER_NODE = 1100 * 1024
# a red twin's verdict event carries every red check's reason and remedy (once, in red)
LARGEST_NODE_EVENT_BYTES = 16 * 1024


# Plays that run once (the fabric capture on one host per segment, the summary on the first node)
# are not per-node costs.
ONCE = ("Capture the fabric from the hosts of the fabric_capture group", "Run summary")


def _event_bytes_per_host(events, play=None):
    per_host = {}
    for event in events:
        data = event.get("event_data") or {}
        if data.get("host") and (data.get("play") == play if play else data.get("play") not in ONCE):
            per_host[data["host"]] = per_host.get(data["host"], 0) + event["_bytes"]
    return per_host


def _no_secret_anywhere(result):
    from_fixture = result.secrets
    leaks = []
    for path in result.files():
        with open(path, "rb") as handle:
            data = handle.read()
        for secret in from_fixture:
            if secret.encode() in data:
                leaks.append((os.path.relpath(path, result.artifacts), secret))
    return leaks


def test_provision_job_like_awx(awx_job, report_url, tmp_path):
    url, store = report_url
    sink = tmp_path / "sink"                     # a folder that outlives the job (AWX: a mounted share)
    extravars = {"gpufleet_lab_output": str(sink), "validate_report_url": url}

    # the project update found the collection in the project itself (collections/requirements.yml)
    assert "gpufleet.provision" in awx_job.project_update_output
    result = awx_job.run("playbooks/provision.yml", "1", extravars)

    assert result.status == "successful", result.stdout[-6000:]
    assert result.read("rc").strip() == "0"
    events = result.events()
    names = [e["event"] for e in events]
    assert "playbook_on_start" in names and names[-1] == "playbook_on_stats"
    # the vaulted password reached the BMCs: the BIOS tasks ran OK on every twin
    bios_ok = {e["event_data"]["host"] for e in events if e["event"] == "runner_on_ok"
               and e["event_data"].get("task") == "Apply the BIOS settings through the BMC (pending until the reboot)"}
    assert bios_ok == {"twin1", "twin2", "twin3", "twin4"}

    # job events: summaries, not reports and fact trees
    per_host = _event_bytes_per_host(events)
    gate = _event_bytes_per_host(events, play="Validation gate")
    print("\njob events per node (bytes): whole job %s, gate %s; job %.0f s" % (per_host, gate, awx_job.seconds))
    assert set(gate) == {"twin1", "twin2", "twin3", "twin4"}
    assert max(gate.values()) < GATE_BYTES_PER_NODE, gate
    assert max(per_host.values()) < EVENT_BYTES_PER_NODE, per_host
    # no event of the gate holds a report or a fact tree (the provision roles' own results, such as
    # the shared fact call's tree, are counted in the whole job's budget above)
    gate_events = [e for e in events if (e.get("event_data") or {}).get("play") == "Validation gate"]
    largest = max(gate_events, key=lambda e: e["_bytes"])
    assert largest["_bytes"] < LARGEST_NODE_EVENT_BYTES, (largest["event"], largest["event_data"].get("task"), largest["_bytes"])
    evaluate = [e for e in events if e["event"] == "runner_on_ok" and e["event_data"].get("task") == "Evaluate every check in one call"
                and e["event_data"].get("play") == "Validation gate"]   # not provision's converged question
    assert len(evaluate) == 4 and all("facts" not in json.dumps(e["event_data"]["res"]) for e in evaluate)

    # the summary: printed, and in the job's artifacts (set_stats), as the AWX job shows it
    stats = names and events[-1]["event_data"].get("artifact_data", {}).get("gpufleet_summary")
    assert stats, events[-1]["event_data"].keys()
    # the washing machine fixed twin1 (BIOS, GRUB, tuning, holds) and twin2 (VT-d, ACS); twin3's rail
    # port is down and miscabled, which no role can fix
    assert sorted(stats["ready"]) == ["twin1", "twin2", "twin4"]
    assert sorted(stats["quarantined"]) == ["twin3"]
    assert "ib.ports" in stats["quarantined"]["twin3"]
    assert stats["failed"] == {}
    assert stats["report_dir"] == str(sink / "gate") and stats["anomalies"]["miscabled_rail"] >= 1
    assert "gpufleet summary: 4 node(s): READY 3, QUARANTINED 1, FAILED 0" in result.stdout

    # the report sinks: the folder and the URL got every node's three files
    for host in ("twin1", "twin2", "twin3", "twin4"):
        for ext in ("json", "xml", "prom"):
            assert (sink / "gate" / ("%s.%s" % (host, ext))).is_file()
            assert "/gate/%s.%s" % (host, ext) in store
    body = json.loads(store["/gate/twin4.json"][1])
    assert body["report"]["status"] == "pass" and store["/gate/twin4.json"][0] == "application/json"
    assert (sink / "fabric" / "fabric.json").is_file()

    # no secret in any artifact: stdout, every event, the command line, the fact cache
    assert _no_secret_anywhere(result) == []

    # validate.yml alone, as a second job template: a relative profile path resolves in the project
    # (the working folder of an ansible-runner job), and the job ends with its own summary
    gate = awx_job.run("playbooks/validate.yml", "2", dict(extravars, validate_profile="inventories/profiles/hgx-h100.yml",
                                                               validate_report_dir=str(sink / "gate2")))
    assert gate.status == "successful", gate.stdout[-4000:]
    assert "gpufleet summary: 4 node(s):" in gate.stdout
    assert gate.stdout.count("gpufleet summary:") == 1
    with open(sink / "gate2" / "twin4.json") as handle:
        assert json.load(handle)["report"]["profile"] == "hgx-h100"
    assert _no_secret_anywhere(gate) == []


def test_unreachable_node_is_named_with_task_and_message(awx_job, tmp_path):
    """A node that cannot be reached fails; the others go on; the summary names the failed node with its
    task and cause, and the job status is failed (AWX marks the job red)."""
    sink = tmp_path / "sink"
    awx_job.inventory["all"]["children"]["lab_twins"]["hosts"]["twin2"]["ansible_port"] = 1
    with open(os.path.join(awx_job.pdd, "inventory", "hosts"), "w") as handle:
        yaml.safe_dump(awx_job.inventory, handle, sort_keys=False)
    result = awx_job.run("playbooks/validate.yml", "3", {"gpufleet_lab_output": str(sink)}, limit="twin2,twin4")
    assert result.status == "failed"
    summary = result.stdout.split("gpufleet summary:", 1)[1]
    assert "READY        twin4" in summary
    assert "FAILED       twin2: task " in summary and "Evaluate every check in one call': unreachable:" in summary, summary[:2000]
    stats = result.events()[-1]["event_data"]["artifact_data"]["gpufleet_summary"]
    assert list(stats["failed"]) == ["twin2"] and stats["failed"]["twin2"]["task"].endswith("Evaluate every check in one call")
    assert _no_secret_anywhere(result) == []


MODULE_DEFAULTS_PLAY = """
- name: BMC and node modules under one module_defaults (issue 14 item 6)
  hosts: twin1,twin4
  gather_facts: false
  module_defaults:
    group/gpufleet.provision.bmc:
      username: "{{ gpufleet_bmc_username }}"
      password: "{{ gpufleet_bmc_password }}"
      ca_path: "{{ gpufleet_bmc_ca_path }}"
    group/gpufleet.provision.node:
      root: "{{ gpufleet_hardware_root }}"
  tasks:
    - name: Read the BIOS through the BMC (check mode predicts, writes nothing)
      gpufleet.provision.redfish_bios:
        baseurl: "https://{{ gpufleet_bmc_address }}"
        settings: {snc: snc4}
      delegate_to: localhost
      check_mode: true
      register: bios
    - name: Read the node
      gpufleet.provision.node_facts:
    - name: Both ran with their group's defaults
      ansible.builtin.assert:
        that:
          - bios.vendor | length > 0
          - ansible_facts.gpufleet.cpu.online_count > 0
"""


def test_module_defaults_per_action_group(awx_job):
    """BMC credentials for the bmc group and the hardware root for the node group in one play: each
    module gets only its own group's options (before: one `gpufleet` group, "Unsupported parameters")."""
    with open(os.path.join(awx_job.project, "module-defaults.yml"), "w") as handle:
        handle.write(MODULE_DEFAULTS_PLAY)
    result = awx_job.run("module-defaults.yml", "4", {})
    assert result.status == "successful", result.stdout[-4000:]
    assert "Unsupported parameters" not in result.stdout
    ok = [e for e in result.events() if e["event"] == "runner_on_ok" and e["event_data"].get("task") == "Both ran with their group's defaults"]
    assert len(ok) == 2
    assert _no_secret_anywhere(result) == []
