"""Which active probes validate_node runs and how (module_utils/_gate/probe_runs.py)."""
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import probe_runs

FACTS = {"pairs": [{"gpu": "0000:18:00.0", "nic": "mlx5_0"}, {"gpu": "0000:2a:00.0", "nic": None},
                   {"gpu": "0000:3a:00.0", "nic": "mlx5_3"}]}


def profile(*names):
    probes = {"nccl": {"enabled": False}, "h2d": {"enabled": False}, "p2p": {"enabled": False},
              "gdr": {"enabled": False}, "dcgm": {"enabled": False}}
    for name in names:
        probes[name]["enabled"] = True
    return {"name": "t", "probes": probes}


def test_only_enabled_probes_are_planned_with_their_timeout_and_label():
    runs = probe_runs.plan(profile("gdr", "dcgm", "h2d"), {"h2d": ["/opt/h2d", "-q"], "gdr": []}, FACTS,
                           "/tmp/x/gpufleet_probe.py", "python3.11", 2, 900)
    assert runs == {
        "h2d_bandwidth": (["/opt/h2d", "-q"], 900, "/opt/h2d -q"),
        # a GPU without a NIC is no pair for the script
        "gdr_bandwidth": (["python3.11", "/tmp/x/gpufleet_probe.py", "gdr", "--pair=mlx5_0=0000:18:00.0",
                           "--pair=mlx5_3=0000:3a:00.0"], 900, "gpufleet_probe.py gdr"),
        "dcgm_diag": (["python3.11", "/tmp/x/gpufleet_probe.py", "dcgm", "--level", "2"], 900, "gpufleet_probe.py dcgm"),
    }


def test_recorded_outputs_and_a_missing_script_plan_nothing():
    assert probe_runs.plan(profile("nccl"), {}, FACTS, "/s", "python3", 1, 60, recorded={"nccl_debug": "text"}) == {}
    assert probe_runs.plan(profile("nccl", "p2p"), {"p2p": ["nvbandwidth"]}, FACTS, None, "python3", 1, 60) == {
        "p2p_bandwidth": (["nvbandwidth"], 60, "nvbandwidth")}
    assert probe_runs.plan({"name": "t"}, {}, FACTS, "/s", "python3", 1, 60) == {}


def test_the_script_is_wanted_only_by_an_enabled_probe_without_command_or_record():
    assert probe_runs.wants_script(profile("nccl"), {"nccl": []}, {}) is True
    assert probe_runs.wants_script(profile("nccl"), {"nccl": ["my-nccl"]}, {}) is False
    assert probe_runs.wants_script(profile("nccl"), {}, {"nccl_debug": "recorded"}) is False
    assert probe_runs.wants_script(profile(), {}, {}) is False
    # bad input is the module's to report (argument spec): no exception here
    assert probe_runs.wants_script("hgx-h100", None, None) is False
