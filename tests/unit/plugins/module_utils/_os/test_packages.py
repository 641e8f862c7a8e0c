"""package_pins rules: parsers on real apt/dnf outputs (tests/fixtures/packages/README.md says which are
real captures and which are written by hand), version matching, resolution, the plan."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._os import packages as P

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "packages")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ---- parsers on real captures -----------------------------------------------------------------

def test_madison_real_debian():
    out = P.parse_madison(fixture("debian12-madison-apt-bash.txt"))
    assert out == {"apt": ["2.6.2", "2.6.1"], "bash": ["5.2.15-2+b13"]}   # virtual m-t-a: no line


def test_madison_skips_sources_and_duplicates():
    out = P.parse_madison(fixture("ubuntu2204-madison-nvidia.txt"))   # hand-written
    assert out["nvidia-driver-550-server"] == ["550.90.07-0ubuntu0.22.04.1", "550.54.15-0ubuntu0.22.04.2"]
    assert "nvidia-graphics-drivers-550-server" not in out


def test_policy_real_debian():
    out = P.parse_policy(fixture("debian12-policy-apt-bash-mta.txt"))
    assert out["apt"]["installed"] == "2.6.1" and out["apt"]["candidate"] == "2.6.2"
    assert [(v["version"], v["priority"], v["installed"]) for v in out["apt"]["versions"]] == [
        ("2.6.2", 500, False), ("2.6.1", 500, True)]
    assert out["apt"]["versions"][1]["sources"][-1] == "100 /var/lib/dpkg/status"[4:]
    assert out["mail-transport-agent"] == {"installed": None, "candidate": None, "versions": []}
    assert out["bash"]["installed"] == "5.2.15-2+b8"


def test_policy_real_cuda_repository():
    out = P.parse_policy(fixture("cuda-policy-cuda-drivers-fabricmanager.txt"))
    table = out["cuda-drivers-fabricmanager"]["versions"]
    assert [v["version"] for v in table][:3] == ["550.54.14-1", "545.23.08-1", "545.23.06-1"]
    assert all(v["priority"] == -1 for v in table)
    assert table[0]["sources"] == [
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  Packages",
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2004/x86_64  Packages"]
    assert len(table) == 7


def test_reverse_provides_real_debian():
    providers = P.parse_reverse_provides(fixture("debian12-showpkg-mta.txt"))
    assert ("postfix", "3.7.11-0+deb12u1") in providers
    assert ("nullmailer", "1:2.2-4") in providers
    assert all(len(p) == 2 and " " not in p[0] for p in providers)


def test_reverse_provides_r580_fabricmanager():
    providers = P.parse_reverse_provides(fixture("cuda-showpkg-nvidia-fabricmanager-580.txt"))
    assert providers == [("nvidia-fabricmanager", "580.65.06-1"), ("nvidia-fabricmanager", "580.82.07-1")]


def test_dnf_list_real_rhel8():
    out = P.parse_dnf_list(fixture("cuda-rhel8-yum-list-fabric-manager.txt"))
    assert out == {"installed": {}, "available": {"nvidia-fabric-manager": ["495.29.05-1"]}}


def test_dnf_list_sections_epochs_and_wrapped_names():
    out = P.parse_dnf_list(fixture("rhel9-dnf-list-nvidia-driver.txt"))   # hand-written
    assert out["installed"] == {"nvidia-driver": ["3:550.54.15-1.el9"]}
    assert out["available"]["nvidia-driver"] == ["3:550.54.15-1.el9", "3:550.90.07-1.el9"]
    assert out["available"]["kmod-nvidia-latest-dkms"] == ["3:550.90.07-1.el9"]


def test_versionlock_list():
    out = P.parse_versionlock(fixture("rhel9-versionlock-list.txt"))
    assert out == {"nvidia-driver": "3:550.90.07-1.el9.*", "nvidia-fabric-manager": "3:550.90.07-1.*",
                   "kmod-nvidia-latest-dkms": "3:550.90.07-1.el9.*"}


def test_showhold_dpkg_query_rpm_query():
    assert P.parse_showhold("nvidia-driver-535-server\nlinux-image-6.8.0-45-generic:amd64\n\n") == {
        "nvidia-driver-535-server", "linux-image-6.8.0-45-generic"}
    text = ("nvidia-driver-535-server\t535.183.01-0ubuntu0.22.04.1\thi \n"
            "old-conf\t1.0\trc \nlibc6:amd64\t2.36-9\tii \nhalf\t1.0\tiF \n")
    assert P.parse_dpkg_query(text) == {"nvidia-driver-535-server": "535.183.01-0ubuntu0.22.04.1",
                                        "libc6": "2.36-9", "half": "1.0"}
    assert P.parse_rpm_query("nvidia-driver\t3:550.90.07-1.el9\nbash\t0:5.1.8-9.el9\n") == {
        "nvidia-driver": "3:550.90.07-1.el9", "bash": "5.1.8-9.el9"}


def test_apt_simulation():
    text = ("NOTE: This is only a simulation!\n"
            "Remv nvidia-fabricmanager-535 [535.183.01-0ubuntu0.22.04.1]\n"
            "Inst nvidia-driver-550-server (550.90.07-0ubuntu0.22.04.1 localhost [amd64])\n"
            "Inst nvidia-fabricmanager-550 [550.54.15-0ubuntu0.22.04.1] (550.90.07-0ubuntu0.22.04.1 localhost [amd64])\n"
            "Conf nvidia-driver-550-server (550.90.07-0ubuntu0.22.04.1 localhost [amd64])\n")
    assert P.parse_apt_simulation(text) == {
        "install": [("nvidia-driver-550-server", "550.90.07-0ubuntu0.22.04.1", None),
                    ("nvidia-fabricmanager-550", "550.90.07-0ubuntu0.22.04.1", "550.54.15-0ubuntu0.22.04.1")],
        "remove": [("nvidia-fabricmanager-535", "535.183.01-0ubuntu0.22.04.1")]}


# ---- versions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version,up", [
    ("550.90.07-0ubuntu0.22.04.1", "550.90.07"), ("3:550.90.07-1.el9", "550.90.07"), ("580.65.06-1", "580.65.06"),
    ("2.6.1", "2.6.1"), ("6.8.0-45.45~22.04.1", "6.8.0"), ("1:2.2-4", "2.2")])
def test_upstream(version, up):
    assert P.upstream(version) == up


def test_matches_exact_upstream_epoch_not_prefix():
    assert P.matches("550.90.07", "550.90.07-0ubuntu0.22.04.1")
    assert P.matches("550.90.07", "3:550.90.07-1.el9")
    assert P.matches("550.90.07-1.el9", "3:550.90.07-1.el9")
    assert P.matches("6.8.0-45.45~22.04.1", "6.8.0-45.45~22.04.1")
    assert not P.matches("550.90.0", "550.90.07-1")          # never a prefix match
    assert not P.matches("550.90.07", "550.90.07.1-1")
    assert P.matches(None, "1.0")


@pytest.mark.parametrize("a,b", [
    ("550.90.07-0ubuntu0.22.04.1", "550.90.07-0ubuntu0.22.04.2"), ("550.54.15-1", "550.90.07-1"),
    ("1.0~rc1", "1.0"), ("9.9-1", "1:0.1-1"), ("2.5.0-0.0.1", "2.7.0-0.0.1"), ("5.2.15-2+b8", "5.2.15-2+b13"),
    ("6.8.0-40.40~22.04.3", "6.8.0-45.45~22.04.1")])
def test_compare_versions(a, b):
    older, newer = a, b
    assert P.compare_versions(older, newer) < 0 < P.compare_versions(newer, older)
    assert P.compare_versions(older, older) == 0


# ---- resolution -------------------------------------------------------------------------------

def _pins(*items):
    return P.normalize_pins([dict(name=n, version=v, **kw) for n, v, kw in items])


UBUNTU = P.parse_madison(fixture("ubuntu2204-madison-nvidia.txt"))


def test_resolve_upstream_to_ubuntu_revision():
    got = P.resolve(_pins(("nvidia-driver-550-server", "550.90.07", {}), ("nvidia-fabricmanager-550", "550.90.07", {})),
                    UBUNTU, {}, {})
    assert [(r["name"], r["version"], r["via"]) for r in got] == [
        ("nvidia-driver-550-server", "550.90.07-0ubuntu0.22.04.1", "name"),
        ("nvidia-fabricmanager-550", "550.90.07-0ubuntu0.22.04.1", "name")]


def test_resolve_keeps_installed_matching_revision_else_newest():
    offered = {"p": ["550.90.07-0ubuntu0.22.04.2", "550.90.07-0ubuntu0.22.04.1"]}
    got = P.resolve(_pins(("p", "550.90.07", {})), offered, {}, {"p": "550.90.07-0ubuntu0.22.04.1"})
    assert got[0]["version"] == "550.90.07-0ubuntu0.22.04.1"
    got = P.resolve(_pins(("p", "550.90.07", {})), {"p": list(reversed(offered["p"]))}, {}, {"p": "550.54.15-1"})
    assert got[0]["version"] == "550.90.07-0ubuntu0.22.04.2"


def test_resolve_r580_virtual_name_through_provider():
    providers = {"nvidia-fabricmanager-580": P.parse_reverse_provides(fixture("cuda-showpkg-nvidia-fabricmanager-580.txt"))}
    got = P.resolve(_pins(("nvidia-fabricmanager-580", "580.65.06", {})), {}, providers, {})
    assert got[0]["name"] == "nvidia-fabricmanager" and got[0]["version"] == "580.65.06-1"
    assert got[0]["requested"] == "nvidia-fabricmanager-580" and got[0]["via"] == "provides"


def test_resolve_failure_names_package_and_offer():
    with pytest.raises(P.PinError) as err:
        P.resolve(_pins(("nvidia-fabricmanager-550", "550.90.12", {}), ("nvidia-driver-999-server", "999.1", {})),
                  UBUNTU, {}, {})
    msg = str(err.value)
    assert "nvidia-fabricmanager-550: version 550.90.12 not in the repositories (offered: " \
           "550.90.07-0ubuntu0.22.04.1, 550.54.15-0ubuntu0.22.04.1)" in msg
    assert "nvidia-driver-999-server: not in the repositories" in msg


def test_resolve_provider_failure_names_providers():
    providers = {"nvidia-fabricmanager-580": [("nvidia-fabricmanager", "580.65.06-1")]}
    with pytest.raises(P.PinError, match=r"version 580\.95\.05 not in the repositories \(offered: nvidia-fabricmanager 580\.65\.06-1\)"):
        P.resolve(_pins(("nvidia-fabricmanager-580", "580.95.05", {})), {}, providers, {})


def test_resolve_ambiguous_providers_fail():
    providers = {"mail-transport-agent": P.parse_reverse_provides(fixture("debian12-showpkg-mta.txt"))}
    with pytest.raises(P.PinError, match="provided by several packages"):
        P.resolve(_pins(("mail-transport-agent", None, {})), {}, providers, {})


def test_normalize_rejects_duplicates_and_nameless():
    with pytest.raises(P.PinError, match="listed twice"):
        P.normalize_pins([{"name": "a"}, {"name": "a"}])
    with pytest.raises(P.PinError, match=r"pins\[0\]"):
        P.normalize_pins([{"version": "1"}])


# ---- plan -------------------------------------------------------------------------------------

def _resolved(name, version, replaces=()):
    return {"requested": name, "name": name, "version": version, "via": "name", "installed": None,
            "replaces": list(replaces)}


def test_plan_replaces_held_branch_instead_of_stacking():
    """twin2: 535 driver and FM held; the profile wants 550."""
    resolved = [_resolved("nvidia-driver-550-server", "550.90.07-0ubuntu0.22.04.1", ["nvidia-driver-[0-9]*"]),
                _resolved("nvidia-fabricmanager-550", "550.90.07-0ubuntu0.22.04.1",
                          ["nvidia-fabricmanager", "nvidia-fabricmanager-[0-9]*"])]
    installed = {"nvidia-driver-535-server": "535.183.01-0ubuntu0.22.04.1",
                 "nvidia-fabricmanager-535": "535.183.01-0ubuntu0.22.04.1", "bash": "5.2"}
    held = {"nvidia-driver-535-server", "nvidia-fabricmanager-535", "linux-image-6.8.0-45-generic"}
    p = P.plan(resolved, installed, held, None, "prefs")
    assert p["install"] == [("nvidia-driver-550-server", "550.90.07-0ubuntu0.22.04.1", None),
                            ("nvidia-fabricmanager-550", "550.90.07-0ubuntu0.22.04.1", None)]
    assert p["remove"] == ["nvidia-driver-535-server", "nvidia-fabricmanager-535"]
    assert p["unhold"] == ["nvidia-driver-535-server", "nvidia-fabricmanager-535"]
    assert p["hold"] == ["nvidia-driver-550-server", "nvidia-fabricmanager-550"]
    assert p["preferences"] == (None, "prefs")
    assert "remove nvidia-driver-535-server (replaced)" in P.describe(p)


def test_plan_fm_one_release_off_is_reinstalled_and_rehold():
    """twin3: FM 550.54.15 beside driver 550.90.07, neither... FM held at the old version."""
    resolved = [_resolved("nvidia-fabricmanager-550", "550.90.07-0ubuntu0.22.04.1", ["nvidia-fabricmanager-[0-9]*"])]
    p = P.plan(resolved, {"nvidia-fabricmanager-550": "550.54.15-0ubuntu0.22.04.1"}, {"nvidia-fabricmanager-550"})
    assert p["install"] == [("nvidia-fabricmanager-550", "550.90.07-0ubuntu0.22.04.1", "550.54.15-0ubuntu0.22.04.1")]
    assert p["remove"] == [] and p["unhold"] == ["nvidia-fabricmanager-550"] and p["hold"] == ["nvidia-fabricmanager-550"]


def test_plan_converged_is_empty():
    resolved = [_resolved("a", "1.0-1", ["a-*"])]
    text = P.preferences_text("s", resolved)
    p = P.plan(resolved, {"a": "1.0-1"}, {"a"}, text, text)
    assert not P.plan_changes(p)


def test_preferences_text():
    text = P.preferences_text("gpufleet-nvidia_driver", [_resolved("b", "2-1"), _resolved("a", "1.0-1")])
    assert text.endswith("\nPackage: a\nPin: version 1.0-1\nPin-Priority: 1001\n\n"
                         "Package: b\nPin: version 2-1\nPin-Priority: 1001\n")
    assert "(set gpufleet-nvidia_driver)" in text.splitlines()[0]


# ---- words that reach the preferences file and argv (issue 32) -------------------------------

@pytest.mark.parametrize("set_name", ["gpufleet", "gpufleet-nvidia_driver", "a.b"])
def test_check_set_name_accepts_file_names_apt_reads(set_name):
    assert P.check_set_name(set_name) == set_name


@pytest.mark.parametrize("set_name", ["../x", "a/b", "", ".x", "a\nb", "a\x00", "x\n", "a b", "x" * 101, None])
def test_check_set_name_refuses_the_rest(set_name):
    with pytest.raises(P.PinError) as err:
        P.check_set_name(set_name)
    assert str(err.value).startswith("set_name %r: not a pin set name" % (set_name,))


@pytest.mark.parametrize("pin, message", [
    ({"name": "a b"}, "pins[0].name 'a b': not a package name"),
    ({"name": "a\n"}, "pins[0].name 'a\\n': not a package name"),
    ({"name": "-o"}, "pins[0].name '-o': not a package name"),
    ({"name": "a", "version": "1\nPackage: *"}, "pins[0] (a).version '1\\nPackage: *': not a package version"),
    ({"name": "a", "version": "1.0 "}, "pins[0] (a).version '1.0 ': not a package version"),
    ({"name": "a", "replaces": ["b c"]}, "pins[0] (a).replaces 'b c': not a package name pattern"),
    ({"name": "a", "replaces": "b*"}, "pins[0] (a).replaces 'b*': not a list of patterns"),
])
def test_normalize_pins_refuses_words_that_would_inject(pin, message):
    with pytest.raises(P.PinError) as err:
        P.normalize_pins([pin])
    assert str(err.value).startswith(message)


def test_normalize_pins_keeps_real_names_and_versions():
    pins = [{"name": "nvidia-driver-550-server", "version": "550.90.07-0ubuntu0.22.04.1", "replaces": ["nvidia-driver-[0-9]*"]},
            {"name": "kmod-nvidia-latest-dkms", "version": "3:550.90.07-1.el9"},
            {"name": "mlnx-ofed-kernel-dkms", "version": "23.10.OFED.23.10.1.1.9.*"}, {"name": "libc6:amd64"}]
    assert [(p["name"], p["version"]) for p in P.normalize_pins(pins)] == [
        ("nvidia-driver-550-server", "550.90.07-0ubuntu0.22.04.1"), ("kmod-nvidia-latest-dkms", "3:550.90.07-1.el9"),
        ("mlnx-ofed-kernel-dkms", "23.10.OFED.23.10.1.1.9.*"), ("libc6:amd64", None)]
