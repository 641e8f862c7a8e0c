"""desired_digest (profile, role variables, the collection's files) and converged_lines: by hand."""
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import converged as flt

PROFILE = {"name": "hgx-h100", "memory": {"thp": "never"}}


def test_desired_digest_moves_with_the_profile_and_the_role_variables_only():
    first = flt.desired_digest(PROFILE, {"tuning_thp": "never"})
    assert first.startswith("sha256:") and len(first) == 71
    assert flt.desired_digest(dict(PROFILE), {"tuning_thp": "never"}) == first          # same content
    assert flt.desired_digest({"memory": {"thp": "never"}, "name": "hgx-h100"}, {"tuning_thp": "never"}) == first
    assert flt.desired_digest(dict(PROFILE, name="other"), {"tuning_thp": "never"}) != first
    assert flt.desired_digest(PROFILE, {"tuning_thp": "always"}) != first
    assert flt.desired_digest(PROFILE, {}) != first
    assert flt.desired_digest(PROFILE, None) == flt.desired_digest(PROFILE, {})


def test_collection_digest_moves_with_a_file_of_the_collection(tmp_path):
    for folder in flt.CODE:
        (tmp_path / folder).mkdir()
    (tmp_path / "roles" / "main.yml").write_text("a\n")
    (tmp_path / "docs.md").write_text("not code\n")
    first = flt.collection_digest(str(tmp_path))
    flt._CACHE.clear()
    (tmp_path / "docs.md").write_text("still not code, longer\n")
    assert flt.collection_digest(str(tmp_path)) == first
    flt._CACHE.clear()
    (tmp_path / "roles" / "main.yml").write_text("ab\n")
    assert flt.collection_digest(str(tmp_path)) != first
    flt._CACHE.clear()
    assert os.path.isdir(os.path.join(flt.COLLECTION, "roles"))          # the real collection is found


def test_desired_digest_bad_input_names_the_cause():
    with pytest.raises(AnsibleFilterError, match="expected the profile mapping"):
        flt.desired_digest("hgx-h100")
    with pytest.raises(AnsibleFilterError, match="role_vars must be a mapping"):
        flt.desired_digest(PROFILE, ["tuning_thp"])


def test_converged_lines_hostlist_then_each_node_to_wash():
    results = [{"converged": True}, {"converged": True}, {"converged": False, "converged_reasons": ["a", "b", "c", "d"]},
               {"skipped": True, "skip_reason": "Conditional result was False"}]
    assert flt.converged_lines(results, ["gpu001", "gpu002", "gpu003", "gpu004"]) == [
        "converged: gpu[001-002] (2): green and unchanged since the last green run; nothing to wash, no reboot,"
        " this was their gate",
        "wash: gpu003: a; b; c",
        "wash: gpu004: Conditional result was False",
    ]
    assert flt.converged_lines([{}], ["gpu001"]) == ["wash: gpu001: not asked"]
    with pytest.raises(AnsibleFilterError, match="one result per host"):
        flt.converged_lines([{}], ["gpu001", "gpu002"])
