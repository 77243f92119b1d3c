# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The package planner on captured dpkg/apt output (Debian 12) and hand-written dnf output."""

import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import packages as pk
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

BEFORE = fixture_text("dpkg", "dpkg-query-debian12-before.txt")
AFTER = fixture_text("dpkg", "dpkg-query-debian12-after.txt")
POLICY_NO_LISTS = fixture_text("apt", "debian12-policy-no-lists.txt")
POLICY = fixture_text("apt", "debian12-policy-after-update.txt")
LOCKED = (100, "", "E: Could not get lock /var/cache/apt/archives/lock. It is held by process 4242 (apt-get)")


class Script:
    """Answers each command from a queue per binary, in order; refuses a command nobody expected."""

    def __init__(self, answers):
        self.answers = {binary: list(queue) for binary, queue in answers.items()}
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        key = argv[0] if argv[0] not in ("apt-get", "dnf", "apt-mark") else " ".join(argv[:2 if argv[0] != "dnf" else 3])
        queue = self.answers.get(key) or self.answers.get(argv[0])
        if not queue:
            raise AssertionError("unexpected command %r" % (argv,))
        return queue.pop(0)

    def ran(self, prefix):
        return [c for c in self.calls if c[:len(prefix)] == prefix]


@pytest.fixture
def lists(tmp_path):
    """An apt lists directory refreshed at time 1000, and no update stamp."""
    directory = tmp_path / "lists"
    directory.mkdir()
    (directory / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages").write_text("")
    os.utime(directory, (1000, 1000))
    return directory


def apt(script, lists, now=1000.0, sleeps=None):
    return pk.Packages(run=script, manager="apt", sleep=(sleeps.append if sleeps is not None else lambda s: None),
                       now=lambda: now, lists_dir=str(lists), stamp=str(lists.parent / "stamp"))


# -- parsers --------------------------------------------------------------------------------

def test_dpkg_query_shows_installed_and_held_only():
    installed = pk.parse_dpkg_query(AFTER)
    assert installed["cryptsetup-bin"][0].startswith("2:2.6.1")
    assert "no-such-package" not in installed
    assert pk.parse_dpkg_query("hi|nvidia-utils-580-server|580.95.05-0ubuntu1\nrc|old|1.0\niU|half|2.0\n") == {
        "nvidia-utils-580-server": ("580.95.05-0ubuntu1", True)}


def test_apt_policy_without_lists_and_after_update():
    assert pk.parse_apt_policy(POLICY_NO_LISTS) == {"cryptsetup-bin": {"candidate": None, "versions": []}}
    after = pk.parse_apt_policy(POLICY)
    assert after["tang"] == {"candidate": "11-2+deb12u1", "versions": ["11-2+deb12u1"]}
    assert after["coreutils"]["versions"] == ["9.1-1"]
    assert "no-such-package" not in after


def test_not_offered_covers_unknown_no_candidate_and_a_version_not_in_the_table():
    entries = [("tang", None), ("cryptsetup-bin", None), ("no-such-package", None)]
    assert pk.not_offered(entries, pk.parse_apt_policy(POLICY_NO_LISTS)) == entries
    assert pk.not_offered(entries, pk.parse_apt_policy(POLICY)) == [("no-such-package", None)]
    assert pk.not_offered([("tang", "11-*"), ("tang", "12-*")], pk.parse_apt_policy(POLICY)) == [("tang", "12-*")]


def test_rpm_query_and_both_versionlock_formats_hand_written():
    assert pk.parse_rpm_query(fixture_text("dnf", "handwritten-rpm-query.txt")) == {
        "tang": ("0:14-3.el9", False), "nvidia-driver": ("3:580.95.05-1.el9", False)}
    assert pk.parse_versionlock(fixture_text("dnf", "handwritten-versionlock-dnf4.txt")) == {
        "nvidia-driver", "nvidia-fabricmanager"}
    assert pk.parse_versionlock(fixture_text("dnf", "handwritten-versionlock-dnf5.txt")) == {"nvidia-driver"}


@pytest.mark.parametrize("have,wanted,matches", [
    ("580.95.05-0ubuntu1", "580.95.05-*", True),
    ("580.95.05-0ubuntu1", "580.95.05-0ubuntu1", True),
    ("580.95.06-0ubuntu1", "580.95.05-*", False),
    ("2:2.6.1-4~deb12u2", "2.6.1-4~deb12u2", True),
    ("2:2.6.1-4~deb12u2", "1:2.6.1-4~deb12u2", False),
    ("3:580.95.05-1.el9", "580.95.05*", True),
    ("9.1-1", None, True),
])
def test_version_matches(have, wanted, matches):
    assert pk.version_matches(have, wanted) is matches


def test_a_version_pattern_resolves_to_the_newest_offered_match():
    policy = pk.parse_apt_policy(
        "x:\n  Installed: (none)\n  Candidate: 1:4.5.0-1\n  Version table:\n     1:4.5.0-1 500\n"
        "        500 http://mirror ./ Packages\n     1:4.4.2-1 500\n     1:4.4.0-1 500\n")
    assert pk.resolve_version(("x", "1:4.4.*"), policy) == ("x", "1:4.4.2-1")
    assert pk.resolve_version(("x", "1:4.4.0-1"), policy) == ("x", "1:4.4.0-1")
    assert pk.resolve_version(("x", None), policy) == ("x", None)
    with pytest.raises(pk.PackagesError, match="^name: no configured repository offers x=2.\\*"):
        pk.resolve_version(("x", "2.*"), policy)


@pytest.mark.parametrize("files,newest,stale", [([], 990, True), (["x_Packages"], None, True),
                                                (["x_Packages"], 990, False), (["x_Packages"], 100, True)])
def test_lists_stale(files, newest, stale):
    assert pk.lists_stale(files, newest, 1000, 600) is stale


@pytest.mark.parametrize("names,message", [
    ("tang", "name: expected a list"),
    ([""], "name: entry '' is not a package"),
    (["tang clevis"], "name: 'tang clevis' is not a package name"),
    (["tang="], "name: 'tang=': the version ''"),
    (["tang=1.0 ; rm"], "name: 'tang=1.0 ; rm': the version '1.0 ; rm'"),
    (["tang=1", "tang=2"], "name: tang is asked for twice, at 1 and at 2"),
    ([None], "name: entry None is not a package"),
])
def test_bad_entries_are_refused_naming_the_input(names, message):
    with pytest.raises(pk.PackagesError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        pk.parse_entries(names)


def test_duplicates_collapse():
    assert pk.parse_entries(["tang", "tang", "clevis=1.*"]) == [("tang", None), ("clevis", "1.*")]


# -- apt ------------------------------------------------------------------------------------

def test_nothing_missing_runs_one_query_and_nothing_else(lists):
    script = Script({"dpkg-query": [(0, "ii |tang|11-2+deb12u1\nii |clevis|19-2\n", "")]})
    result = apt(script, lists).ensure(["tang", "clevis"])
    assert result["changed"] is False and result["installed"] == [] and result["cache_updated"] is False
    assert len(script.calls) == 1


def test_fresh_lists_that_offer_the_packages_install_without_refresh(lists):
    script = Script({"dpkg-query": [(1, BEFORE, ""), (0, "ii |tang|11-2+deb12u1\n", "")],
                     "apt-cache": [(0, POLICY, "")], "apt-get install": [(0, "", "")]})
    result = apt(script, lists, now=1500).ensure(["tang"], cache_valid_time=3600)
    assert result["installed"] == ["tang"] and result["changed"] and not result["cache_updated"]
    assert not script.ran(["apt-get", "update"])
    install = script.ran(["apt-get", "install"])[0]
    assert install[-1] == "tang" and "--no-install-recommends" in install and "DPkg::Lock::Timeout=600" in install
    assert result["diff"] == {"before": "tang (not installed)\n", "after": "tang 11-2+deb12u1\n"}


@pytest.mark.parametrize("now,update_cache,empty,reason", [
    (1000 + 3601, False, False, "lists older than 3600 s"),
    (1000, True, False, "asked (update_cache)"),
    (1000, False, True, "no package lists yet"),
])
def test_stale_lists_or_a_forced_refresh_update_before_installing(lists, now, update_cache, empty, reason):
    if empty:
        for child in lists.iterdir():
            child.unlink()
    script = Script({"dpkg-query": [(1, BEFORE, ""), (0, "ii |tang|11-2+deb12u1\n", "")],
                     "apt-cache": [(0, POLICY, "")], "apt-get update": [(0, "", "")], "apt-get install": [(0, "", "")]})
    result = apt(script, lists, now=now).ensure(["tang"], update_cache=update_cache)
    assert result["refresh_reason"] == reason and result["cache_updated"]
    assert [c[:2] for c in script.calls if c[0] == "apt-get"] == [["apt-get", "update"], ["apt-get", "install"]]
    assert (lists.parent / "stamp").stat().st_mtime == now


def test_a_package_the_fresh_lists_do_not_offer_refreshes_them(lists):
    script = Script({"dpkg-query": [(1, BEFORE, ""), (0, "ii |tang|11-2+deb12u1\n", "")],
                     "apt-cache": [(0, POLICY_NO_LISTS, ""), (0, POLICY, "")],
                     "apt-get update": [(0, "", "")], "apt-get install": [(0, "", "")]})
    result = apt(script, lists).ensure(["tang"])
    assert result["refresh_reason"] == "the lists do not offer tang"
    assert script.ran(["apt-get", "update"])


def test_still_not_offered_after_the_refresh_fails_before_installing(lists):
    script = Script({"dpkg-query": [(1, BEFORE, "")], "apt-cache": [(0, POLICY, ""), (0, POLICY, "")],
                     "apt-get update": [(0, "", "")]})
    with pytest.raises(pk.PackagesError, match="^name: no configured repository offers no-such-package "):
        apt(script, lists).ensure(["tang", "no-such-package"])
    assert not script.ran(["apt-get", "install"])


def test_the_lock_is_retried_then_given_up(lists):
    sleeps = []
    script = Script({"dpkg-query": [(1, BEFORE, ""), (0, "ii |tang|11-2+deb12u1\n", "")],
                     "apt-cache": [(0, POLICY, "")], "apt-get install": [LOCKED, LOCKED, (0, "", "")]})
    apt(script, lists, sleeps=sleeps).ensure(["tang"])
    assert sleeps == [10, 10]
    script = Script({"dpkg-query": [(1, BEFORE, "")], "apt-cache": [(0, POLICY, "")],
                     "apt-get install": [LOCKED] * 4})
    with pytest.raises(pk.PackagesError, match="apt-get install tang failed .*Could not get lock"):
        apt(script, lists).ensure(["tang"], lock_timeout=30)
    assert len(script.ran(["apt-get", "install"])) == 4


def test_versions_and_hold(lists):
    query_before = "ii |nvidia-utils-580-server|580.82.07-0ubuntu1\nhi |libnvidia-compute-580-server|580.95.05-0ubuntu1\n"
    query_after = "hi |nvidia-utils-580-server|580.95.05-0ubuntu1\nhi |libnvidia-compute-580-server|580.95.05-0ubuntu1\n"
    policy = ("nvidia-utils-580-server:\n  Installed: 580.82.07-0ubuntu1\n  Candidate: 580.95.05-0ubuntu1\n"
              "  Version table:\n     580.95.05-0ubuntu1 500\n        500 http://archive noble-updates/restricted\n"
              " *** 580.82.07-0ubuntu1 100\n        100 /var/lib/dpkg/status\n")
    script = Script({"dpkg-query": [(0, query_before, ""), (0, query_after, "")], "apt-cache": [(0, policy, "")],
                     "apt-get install": [(0, "", "")], "apt-mark hold": [(0, "", "")]})
    names = ["nvidia-utils-580-server=580.95.05-*", "libnvidia-compute-580-server=580.95.05-*"]
    result = apt(script, lists).ensure(names, hold=True, allow_downgrade=True)
    assert result["installed"] == ["nvidia-utils-580-server=580.95.05-*"]
    assert result["held"] == ["nvidia-utils-580-server"]
    install = script.ran(["apt-get", "install"])[0]
    # apt-get takes no version pattern: the newest offered version matching it is installed.
    assert install[-1] == "nvidia-utils-580-server=580.95.05-0ubuntu1"
    assert "--allow-downgrades" in install and "--allow-change-held-packages" in install
    assert script.ran(["apt-mark", "hold"]) == [["apt-mark", "hold", "nvidia-utils-580-server"]]
    assert "nvidia-utils-580-server 580.95.05-0ubuntu1 (held)" in result["diff"]["after"]


def test_an_install_that_leaves_a_package_at_another_version_fails(lists):
    script = Script({"dpkg-query": [(1, BEFORE, ""), (0, "ii |tang|10-1\n", "")],
                     "apt-cache": [(0, POLICY, "")], "apt-get install": [(0, "", "")]})
    with pytest.raises(pk.PackagesError, match="left tang=11-\\* not installed"):
        apt(script, lists).ensure(["tang=11-*"])


def test_check_mode_reports_install_hold_and_refresh_and_changes_nothing(lists):
    for child in lists.iterdir():
        child.unlink()
    script = Script({"dpkg-query": [(1, BEFORE, "")], "apt-cache": [(0, POLICY_NO_LISTS, "")]})
    result = apt(script, lists).ensure(["tang", "cryptsetup-bin"], hold=True, check_mode=True)
    assert result["changed"] is True
    assert result["installed"] == ["tang", "cryptsetup-bin"] and result["held"] == ["tang", "cryptsetup-bin"]
    assert result["cache_updated"] and result["not_offered"] == ["tang", "cryptsetup-bin"]
    assert result["commands"] == []
    assert {c[0] for c in script.calls} == {"dpkg-query", "apt-cache"}
    assert result["diff"]["after"] == "tang (newest offered) (held)\ncryptsetup-bin (newest offered) (held)\n"


def test_check_mode_of_a_converged_host_changes_nothing(lists):
    script = Script({"dpkg-query": [(0, "hi |tang|11-2+deb12u1\n", "")]})
    assert apt(script, lists).ensure(["tang"], hold=True, check_mode=True)["changed"] is False


def test_bad_settings_are_refused_before_any_command(lists):
    script = Script({})
    with pytest.raises(pk.PackagesError, match="^lock_timeout: expected a number of seconds"):
        apt(script, lists).ensure(["tang"], lock_timeout=-1)
    with pytest.raises(pk.PackagesError, match="^manager: must be one of apt, dnf"):
        pk.Packages(run=script, manager="zypper", sleep=None, now=None)
    assert script.calls == []


def test_dpkg_query_failing_otherwise_is_an_error(lists):
    script = Script({"dpkg-query": [(2, "", "dpkg-query: error: failed to open package info file")]})
    with pytest.raises(pk.PackagesError, match="dpkg-query failed \\(exit status 2\\)"):
        apt(script, lists).ensure(["tang"])


# -- dnf (hand-written outputs) -------------------------------------------------------------

def dnf(script):
    return pk.Packages(run=script, manager="dnf", sleep=lambda s: None, now=lambda: 0)


def test_dnf_installs_missing_with_versions_and_locks():
    rpm = fixture_text("dnf", "handwritten-rpm-query.txt")
    script = Script({"rpm": [(1, rpm, ""), (0, rpm + "clevis|0:20-2.el9\n", "")],
                     "dnf -q versionlock": [(0, fixture_text("dnf", "handwritten-versionlock-dnf4.txt"), ""), (0, "", "")],
                     "dnf -y install": [(0, "", "")]})
    result = dnf(script).ensure(["tang", "clevis=20*", "nvidia-driver"], hold=True)
    assert result["installed"] == ["clevis=20*"]
    assert script.ran(["dnf", "-y", "install"]) == [["dnf", "-y", "install", "--setopt=install_weak_deps=False", "clevis-20*"]]
    assert script.ran(["dnf", "-q", "versionlock", "add"]) == [["dnf", "-q", "versionlock", "add", "tang", "clevis"]]


def test_dnf_retries_an_unknown_package_with_refreshed_metadata_then_names_it():
    rpm = fixture_text("dnf", "handwritten-rpm-query.txt")
    no_match = (1, "", fixture_text("dnf", "handwritten-install-no-match.txt"))
    script = Script({"rpm": [(1, rpm, "")], "dnf -y install": [no_match, no_match]})
    with pytest.raises(pk.PackagesError, match="^name: no enabled repository offers no-such-package "):
        dnf(script).ensure(["no-such-package"])
    assert script.ran(["dnf", "-y", "install"])[1][4] == "--refresh"


def test_dnf_check_mode_and_a_missing_versionlock_plugin():
    rpm = fixture_text("dnf", "handwritten-rpm-query.txt")
    script = Script({"rpm": [(1, rpm, "")]})
    result = dnf(script).ensure(["clevis"], check_mode=True)
    assert result["installed"] == ["clevis"] and result["changed"] and result["commands"] == []
    script = Script({"rpm": [(1, rpm, "")], "dnf -q versionlock": [(1, "", "No such command: versionlock.")]})
    with pytest.raises(pk.PackagesError, match="^hold: dnf versionlock is not available"):
        dnf(script).ensure(["tang"], hold=True)
