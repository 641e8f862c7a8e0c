"""Bad input never raises out of the gate: generated garbage for the profile, the command line,
GRUB sources, command outputs and facts ends as ProfileError / error / skip, not a traceback."""
import copy
import importlib.util
import os

from hypothesis import given, settings, strategies as st

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import cmdline
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.profile import ProfileError, validate

# The sample node of the sibling test module (test folders are not packages here).
_SPEC = importlib.util.spec_from_file_location("validate_test_checks", os.path.join(os.path.dirname(__file__), "test_checks.py"))
_SAMPLE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SAMPLE)
PROFILE, sample_inputs = _SAMPLE.PROFILE, _SAMPLE.sample_inputs

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))
JSONISH = st.recursive(
    SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
WORDS = st.lists(st.sampled_from(["hugepagesz=1G", "hugepagesz=2M", "hugepagesz=x", "hugepages=16", "hugepages=x",
                                  "default_hugepagesz=1G", "iommu=pt", "iommu", "console=ttyS0", "=", "a=b=c"]), max_size=10)


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_profile_validation_raises_only_profile_error(data):
    try:
        validate(data, gate.CHECK_IDS)
    except ProfileError as exc:
        assert str(exc).startswith("profile")


@settings(max_examples=200, deadline=None)
@given(WORDS)
def test_cmdline_rules_never_raise(words):
    tokens = [(w.partition("=")[0], w.partition("=")[2] if "=" in w else None, "proc/cmdline") for w in words]
    problems, pools = cmdline.analyse_cmdline(tokens)
    assert isinstance(problems, list) and all(isinstance(v, int) for v in pools.values())


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_grub_sources_parse_or_name_the_file(text):
    try:
        cmdline.grub_tokens([("etc/default/grub.d/x.cfg", "GRUB_CMDLINE_LINUX=" + text)])
    except ValueError as exc:
        assert str(exc).startswith("etc/default/grub.d/x.cfg line 1")


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["nvidia_smi_q", "ofed_info", "modinfo_mlx5_core", "apt_mark_showhold",
                                        "nccl_debug", "h2d_bandwidth", "mlxconfig_0000:19:00.0"]), st.text(max_size=80)))
def test_garbage_outputs_give_statuses_not_tracebacks(outputs):
    ctx = sample_inputs()
    ctx.outputs.update(outputs)
    report = gate.evaluate(ctx)
    assert all(c["status"] in ("pass", "fail", "skip", "error") for c in report["checks"])
    assert not any("internal error" in c["reason"] for c in report["checks"]), \
        [(c["id"], c["reason"]) for c in report["checks"] if "internal error" in c["reason"]]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["cpu", "numa", "kernel", "nvidia", "os", "mounts", "nics", "gpus", "pairs", "pcie", "nvme"]),
       st.sampled_from([None, [], {}, 0, "x"]))
def test_missing_or_mistyped_fact_sections_never_raise(section, value):
    ctx = sample_inputs(profile=copy.deepcopy(PROFILE))
    ctx.facts[section] = value
    report = gate.evaluate(ctx)
    assert report["status"] in ("pass", "fail")
    assert len(report["checks"]) == len(gate.CHECK_IDS)
