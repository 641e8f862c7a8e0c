"""desired_digest: the profile, the role variables, the collection's files; expectations by hand."""
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import desired_digest as flt

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
