"""package_pins against real apt in a lab twin (the lab's repository: equivs packages with the real
names and Ubuntu revisions). twin4 starts clean (550.90.07 driver and FM, held): it is moved to the
535 branch (replacing the held 550 packages, not stacking) and back, with check mode and a second run
at each end. It ends as it started, so the role tests find the lab as its inventory describes it."""
DRIVER_550 = "550.90.07-0ubuntu0.22.04.1"
DRIVER_535 = "535.183.01-0ubuntu0.22.04.1"


def installed(dpkg):
    """dpkg-query lines of installed packages only (not rc: removed, config kept; not un)."""
    return "".join(line + "\n" for line in dpkg.splitlines() if line.split()[-1] not in ("rc", "un"))


def pins(branch, version):
    return [{"name": "nvidia-driver-%s-server" % branch, "version": version, "replaces": ["nvidia-driver-[0-9]*"]},
            {"name": "nvidia-fabricmanager-%s" % branch, "version": version,
             "replaces": ["nvidia-fabricmanager", "nvidia-fabricmanager-[0-9]*"]}]


def test_resolved_fails_naming_the_offer_and_changes_nothing(lab, module, node_state):
    before = node_state("twin4")
    ok = module("twin4", "gpufleet.provision.package_pins", {"state": "resolved", "pins": pins("550", "550.90.07")})
    assert not ok.get("failed") and not ok["changed"]
    assert [(r["name"], r["version"]) for r in ok["resolved"]] == [
        ("nvidia-driver-550-server", DRIVER_550), ("nvidia-fabricmanager-550", DRIVER_550)]
    bad = module("twin4", "gpufleet.provision.package_pins", {"state": "resolved", "pins": pins("550", "550.90.12")})
    assert bad["failed"]
    assert "nvidia-driver-550-server: version 550.90.12 not in the repositories (offered: %s, 550.54.15-0ubuntu0.22.04.1)" \
        % DRIVER_550 in bad["msg"]
    assert node_state("twin4") == before


def test_replace_branch_check_mode_then_apply_then_idempotent(lab, module, node_state):
    before = node_state("twin4")
    assert "nvidia-driver-550-server %s hi" % DRIVER_550 in before["dpkg"]
    args = {"set_name": "gpufleet-test", "pins": pins("535", "535.183.01")}

    predicted = module("twin4", "gpufleet.provision.package_pins", args, check=True, diff=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted
    assert predicted["plan"]["remove"] == ["nvidia-driver-550-server", "nvidia-fabricmanager-550"]
    assert [i[:2] for i in predicted["plan"]["install"]] == [
        ["nvidia-driver-535-server", DRIVER_535], ["nvidia-fabricmanager-535", DRIVER_535]]
    assert predicted["plan"]["unhold"] == ["nvidia-driver-550-server", "nvidia-fabricmanager-550"]
    # apt's own simulation agrees with the plan: exactly these packages in, exactly those out
    sim = predicted["simulation"]
    assert sorted(n for n, _, _ in sim["install"]) == ["nvidia-driver-535-server", "nvidia-fabricmanager-535"]
    assert sorted(n for n, _ in sim["remove"]) == ["nvidia-driver-550-server", "nvidia-fabricmanager-550"]
    assert "nvidia-driver-535-server (not installed)" in predicted["diff"]["before"]
    assert "nvidia-driver-535-server %s held" % DRIVER_535 in predicted["diff"]["after"]
    assert node_state("twin4") == before                      # check mode changed nothing

    applied = module("twin4", "gpufleet.provision.package_pins", args)
    assert applied["changed"] and not applied.get("failed"), applied.get("msg")
    after = node_state("twin4")
    assert "nvidia-driver-535-server %s hi" % DRIVER_535 in after["dpkg"]
    assert "nvidia-fabricmanager-535 %s hi" % DRIVER_535 in after["dpkg"]
    assert "nvidia-driver-550-server" not in installed(after["dpkg"])  # removed (its config may stay: rc)
    # the 550 holds moved to 535; the twin's other holds (its kernel's packages) stay as they were
    others = [p for p in before["holds"].split() if p not in ("nvidia-driver-550-server", "nvidia-fabricmanager-550")]
    assert "nvidia-driver-550-server" in before["holds"].split()
    assert after["holds"].split() == sorted(others + ["nvidia-driver-535-server", "nvidia-fabricmanager-535"])
    assert "Package: nvidia-fabricmanager-535\nPin: version %s\nPin-Priority: 1001" % DRIVER_535 in after["prefs"]
    # apt itself now refuses to move them: the preferences pin wins over the newer 550 candidate
    policy = lab.ssh("twin4", "apt-cache policy nvidia-fabricmanager-535").stdout
    assert "Candidate: %s" % DRIVER_535 in policy

    again = module("twin4", "gpufleet.provision.package_pins", args)
    assert not again["changed"] and again["msg"] == "all pinned and held"
    assert not module("twin4", "gpufleet.provision.package_pins", args, check=True)["changed"]

    # and back to the fleet's 550 (the pin set's file now names 550 only: replaced, not stacked)
    back = module("twin4", "gpufleet.provision.package_pins", {"set_name": "gpufleet-test", "pins": pins("550", "550.90.07")})
    assert back["changed"] and not back.get("failed"), back.get("msg")
    final = node_state("twin4")
    assert final["holds"] == before["holds"]
    assert "535" not in final["prefs"] and "Pin: version %s" % DRIVER_550 in final["prefs"]
    assert [line for line in installed(final["dpkg"]).splitlines() if "nvidia" in line] == \
        [line for line in installed(before["dpkg"]).splitlines() if "nvidia" in line]
    lab.ssh("twin4", "rm -f /etc/apt/preferences.d/gpufleet-test.pref")
