# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.packages_present through main(): arguments, manager choice, check mode, errors."""

from ansible_collections.gpucloud.fleet.plugins.modules import packages_present
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import FakeCommands, fixture_text, run_module

CONVERGED = "ii |tang|11-2+deb12u1\nii |cryptsetup-bin|2:2.6.1-4~deb12u2\n"


def test_a_converged_host_runs_one_dpkg_query_and_reports_no_change():
    commands = FakeCommands({"dpkg-query": (0, CONVERGED, ""), "/usr/bin/apt-get": (99, "", "must not run")})
    result = run_module(packages_present, {"name": ["tang", "cryptsetup-bin"]}, commands=commands)
    assert result["changed"] is False and result["manager"] == "apt" and result["installed"] == []
    assert [argv[0] for argv, _env in commands.calls] == ["dpkg-query"]
    assert commands.calls[0][1]["LC_ALL"] == "C"


def test_check_mode_reports_the_missing_packages_without_running_apt_get():
    commands = FakeCommands({"dpkg-query": (1, fixture_text("dpkg", "dpkg-query-debian12-before.txt"), ""),
                             "apt-cache": (0, fixture_text("apt", "debian12-policy-after-update.txt"), ""),
                             "/usr/bin/apt-get": (99, "", "must not run")})
    result = run_module(packages_present, {"name": ["tang"], "cache_valid_time": 10 ** 12}, check_mode=True,
                        commands=commands)
    assert result["changed"] is True and result["installed"] == ["tang"] and result["commands"] == []
    assert result["diff"]["before"] == "tang (not installed)\n"
    assert not [argv for argv, _env in commands.calls if argv[0].endswith("apt-get")]


def test_without_apt_get_the_module_uses_dnf():
    commands = FakeCommands({"rpm": (0, "tang|0:14-3.el9\n", "")})
    result = run_module(packages_present, {"name": ["tang"]}, commands=commands)
    assert result["manager"] == "dnf" and result["changed"] is False


def test_bad_input_fails_naming_it_before_any_command():
    commands = FakeCommands({})
    result = run_module(packages_present, {"name": ["tang clevis"], "manager": "apt"}, commands=commands)
    assert result["failed"] and result["msg"].startswith("packages_present: name: 'tang clevis' is not a package name")
    assert commands.calls == []


def test_commands_run_by_the_path_found_in_the_c_locale_without_questions():
    commands = FakeCommands({"/usr/bin/dpkg-query": (0, CONVERGED, "")})
    result = run_module(packages_present, {"name": ["tang"], "manager": "apt"}, commands=commands)
    assert result["changed"] is False
    assert [(argv[0], env) for argv, env in commands.calls] == [
        ("/usr/bin/dpkg-query", {"LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"})]


def test_a_missing_package_tool_fails_naming_it():
    result = run_module(packages_present, {"name": ["tang"], "manager": "apt"}, commands=FakeCommands({}))
    assert result["failed"] is True
    assert result["msg"] == "Failed to find required executable dpkg-query"
