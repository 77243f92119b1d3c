# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The sysctl_profile module on a root made of a lab image's sysctl.d files and a captured /proc/sys."""

import functools
from unittest import mock

from ansible_collections.gpucloud.fleet.plugins.module_utils import sysctl as utils
from ansible_collections.gpucloud.fleet.plugins.modules import sysctl_profile
from ansible_collections.gpucloud.fleet.tests.unit.plugins.module_utils.test_sysctl import (
    PROFILE_FILE,
    CapturedProcSys,
    lab_root,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import run_module

PROFILE = {"vm.max_map_count": 1048576, "net.core.rmem_max": 268435456, "kernel.yama.ptrace_scope": 1}


def run(tmp_path, proc, args, check_mode=False):
    root = tmp_path / "debian12" if (tmp_path / "debian12").exists() else lab_root(tmp_path, "debian12")
    with mock.patch.object(sysctl_profile, "ProcSys", lambda: proc), \
            mock.patch.object(sysctl_profile, "ensure", functools.partial(utils.ensure, root=str(root))):
        # commands=None: the module must not run any command (no sysctl binary needed).
        return run_module(sysctl_profile, args, check_mode=check_mode)


def test_module_applies_and_warns_about_what_the_kernel_lacks(tmp_path):
    proc = CapturedProcSys("debian12-host")
    result = run(tmp_path, proc, {"settings": PROFILE, "path": PROFILE_FILE, "comment": "c"})
    assert "failed" not in result
    assert result["changed"] and result["applied"] == {"net.core.rmem_max": "268435456"}
    assert result["not_applied"] == {"kernel.yama.ptrace_scope": "not in this kernel"}
    assert result["warnings"] == [
        "these values are in %s for the next boot but not in the running kernel: "
        "kernel.yama.ptrace_scope: not in this kernel" % PROFILE_FILE]
    assert result["diff"][0]["after"] == (
        "# c\nkernel.yama.ptrace_scope = 1\nnet.core.rmem_max = 268435456\nvm.max_map_count = 1048576\n")

    again = run(tmp_path, proc, {"settings": PROFILE, "path": PROFILE_FILE, "comment": "c"}, check_mode=True)
    assert (again["changed"], again["applied"], again["file_changed"]) == (False, {}, False)


def test_module_check_mode_in_a_container_reports_only_the_file(tmp_path):
    proc = CapturedProcSys("debian12-container")
    result = run(tmp_path, proc, {"settings": PROFILE, "path": PROFILE_FILE}, check_mode=True)
    assert (result["changed"], result["file_changed"], result["applied"]) == (True, True, {})
    assert result["not_applied"]["net.core.rmem_max"] == "read-only here (is 4194304, profile 268435456)"
    assert result["diff"][0]["before"] == ""
    assert not (tmp_path / "debian12" / PROFILE_FILE.lstrip("/")).exists()


def test_module_fails_with_the_path_on_a_bad_value(tmp_path):
    result = run(tmp_path, CapturedProcSys("debian12-container"),
                 {"settings": {"vm.max_map_count": "1\nkernel.x = 2"}, "path": PROFILE_FILE})
    assert result["failed"] and result["msg"] == PROFILE_FILE + ": malformed sysctl keys or values: vm.max_map_count"
