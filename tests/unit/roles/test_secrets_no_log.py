"""Every role option that holds a secret (its name says password, token or secret) is marked
``no_log: true`` in meta/argument_specs.yml, so ansible-core's argument validation never shows its
value (issue 31: the bios role's BMC password was not, while the reboot role's was)."""
import glob
import os

import yaml

ROLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles"))
SECRET_WORDS = ("password", "token", "secret")


def _options(options, prefix=""):
    """(dotted name, spec) of every option and suboption."""
    for name, spec in (options or {}).items():
        yield prefix + name, spec or {}
        yield from _options((spec or {}).get("options"), prefix + name + ".")


def secret_options_without_no_log(path):
    with open(path) as handle:
        specs = yaml.safe_load(handle) or {}
    missing = []
    for entry, spec in (specs.get("argument_specs") or {}).items():
        for name, option in _options((spec or {}).get("options")):
            leaf = name.rsplit(".", 1)[-1].lower()
            if any(word in leaf for word in SECRET_WORDS) and option.get("no_log") is not True:
                missing.append("%s (entry %s)" % (name, entry))
    return missing


def test_every_secret_role_option_is_no_log():
    paths = sorted(glob.glob(os.path.join(ROLES, "*", "meta", "argument_specs.yml")))
    assert len(paths) >= 10, paths
    missing = dict((os.path.relpath(path, ROLES), found) for path in paths
                   for found in [secret_options_without_no_log(path)] if found)
    assert missing == {}, "secret options without no_log: true: %s" % missing


def test_the_rule_sees_a_secret_without_no_log(tmp_path):
    """The check can fail: a password option (also as a suboption) without no_log is found."""
    path = tmp_path / "argument_specs.yml"
    path.write_text("argument_specs:\n  main:\n    options:\n      x_bmc_password: {type: str}\n"
                    "      x_api: {type: dict, options: {token: {type: str}, name: {type: str}}}\n"
                    "      x_secret_key: {type: str, no_log: true}\n")
    assert secret_options_without_no_log(str(path)) == ["x_bmc_password (entry main)", "x_api.token (entry main)"]
