"""The profile lookup: where it looks, strict validation, errors that name the path or the key."""
import os

import pytest
from ansible.errors import AnsibleLookupError
from ansible_collections.gpufleet.provision.plugins.lookup import profile as lookup_profile


def run(terms, inventory_dir=None):
    # LookupModule.run() is load() over the inventory, playbook and current folders
    return [lookup_profile.load(term, [inventory_dir]) for term in terms]


def test_shipped_profile_by_name():
    (prof,) = run(["hgx-h100"])
    assert prof["name"] == "hgx-h100"
    assert prof["kernel"]["release"] == "6.8.0-45-generic"
    assert prof["gpu"]["count"] == 8


def test_relative_path_from_the_inventory_folder(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mine.yml").write_text("name: mine\ncpu: {smt: true}\n")
    (prof,) = run(["profiles/mine.yml"], inventory_dir=str(tmp_path))
    assert prof["name"] == "mine" and prof["cpu"]["smt"] is True and prof["gpu"] is None


def test_missing_file_names_every_place_tried(tmp_path):
    with pytest.raises(AnsibleLookupError) as err:
        run(["nope.yml"], inventory_dir=str(tmp_path))
    assert "profile nope.yml: not found" in str(err.value)
    assert os.path.join(str(tmp_path), "nope.yml") in str(err.value)


def test_a_typo_names_the_file_and_the_key(tmp_path):
    path = tmp_path / "typo.yml"
    path.write_text("name: typo\nkernel: {cmdlne: {}}\n")
    with pytest.raises(AnsibleLookupError, match=r"profile .*typo.yml: profile key kernel.cmdlne: unknown"):
        run([str(path)])


def test_a_mapping_is_validated_as_it_is():
    (prof,) = run([{"name": "inline", "memory": {"hugepages": {"1G": 4}}}])
    assert prof["memory"]["hugepages"] == {"1048576": 4}
    with pytest.raises(AnsibleLookupError, match="must be true or false"):
        run([{"cpu": {"smt": "yes"}}])


def test_cache_follows_the_file(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("name: one\n")
    assert run([str(path)])[0]["name"] == "one"
    path.write_text("name: two\n")
    os.utime(path, ns=(1, 10 ** 18))
    assert run([str(path)])[0]["name"] == "two"
