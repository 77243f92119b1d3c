# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The module over module_utils/mig_layout.py: how it runs commands (ensure() is tested there)."""

from ansible_collections.gpucloud.fleet.plugins.modules import nvidia_mig_layout
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text, run_module

SMI = "/usr/bin/nvidia-smi"
MIG_PARTED = "/usr/bin/nvidia-mig-parted"
H200_MIG = {"name": "h200_sxm", "gpu_model": "H200", "mig": {"strategy": "single", "layout": "all-3g.71gb"}}


class H200:
    """nvidia-smi on the captured H200 (MIG disabled, no compute process); records (argv, environ).

    A MIG mode change stays pending, as it does on a GPU that is held."""

    def __init__(self):
        self.calls = []
        self.xml = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml")

    def __call__(self, argv, environ_update):
        self.calls.append((argv, environ_update))
        if argv == [SMI, "-q", "-x"]:
            return 0, self.xml, ""
        if argv[:2] == [SMI, "--query-compute-apps=pid,process_name,gpu_uuid"]:
            return 0, "", ""
        if argv == [SMI, "mig", "-lgip"]:
            return 0, fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_mig_-lgip.txt"), ""
        if argv == [SMI, "-i", "0", "-mig", "1"] or argv[:3] == [MIG_PARTED, "apply", "--mode-only"]:
            self.xml = self.xml.replace("<pending_mig>Disabled</pending_mig>", "<pending_mig>Enabled</pending_mig>")
            return 0, "Enabled MIG Mode for GPU 00000000:00:06.0\nAll done.\n", ""
        raise AssertionError("unexpected command %r" % (argv,))


def test_a_matching_layout_changes_nothing_and_runs_nvidia_smi_in_the_c_locale():
    host = H200()
    result = run_module(nvidia_mig_layout, {"profile": {"name": "h200_sxm", "mig": False}}, commands=host,
                        binaries=("nvidia-smi",))
    assert (result["changed"], result["commands"], result["layout"]) == (False, [], "all-disabled")
    assert host.calls == [([SMI, "-q", "-x"], {"LC_ALL": "C"})]


def test_check_mode_reports_the_first_command_and_changes_nothing():
    host = H200()
    result = run_module(nvidia_mig_layout, {"profile": H200_MIG}, check_mode=True, commands=host,
                        binaries=("nvidia-smi",))
    assert (result["changed"], result["commands"]) == (True, ["nvidia-smi -i 0 -mig 1"])
    assert not any("-mig" in call[0] for call in host.calls)
    assert "GPU0: " in result["diff"]["before"]


def test_the_mode_change_runs_the_found_nvidia_smi():
    host = H200()
    result = run_module(nvidia_mig_layout, {"profile": H200_MIG}, commands=host, binaries=("nvidia-smi",))
    assert (result["changed"], result["reset_required"]) == (True, True)
    assert ([SMI, "-i", "0", "-mig", "1"], {"LC_ALL": "C"}) in host.calls


def test_mig_parted_is_found_by_name():
    host = H200()
    args = {"profile": H200_MIG, "tool": "mig-parted", "config_file": "/etc/gpucloud/mig-parted.yaml"}
    result = run_module(nvidia_mig_layout, args, commands=host, binaries=("nvidia-smi", "nvidia-mig-parted"))
    assert result["commands"] == [
        "nvidia-mig-parted apply --mode-only --skip-reset -f /etc/gpucloud/mig-parted.yaml -c all-3g.71gb"]
    assert [MIG_PARTED, "apply", "--mode-only", "--skip-reset", "-f", "/etc/gpucloud/mig-parted.yaml",
            "-c", "all-3g.71gb"] in [call[0] for call in host.calls]


def test_a_missing_mig_parted_fails_naming_it():
    args = {"profile": H200_MIG, "tool": "mig-parted", "config_file": "/etc/gpucloud/mig-parted.yaml"}
    result = run_module(nvidia_mig_layout, args, commands=H200(), binaries=("nvidia-smi",))
    assert result["failed"] is True
    assert result["msg"] == "Failed to find required executable nvidia-mig-parted"


def test_without_nvidia_smi_nothing_runs():
    host = H200()
    result = run_module(nvidia_mig_layout, {"profile": H200_MIG}, commands=host)
    assert result["msg"] == "Failed to find required executable nvidia-smi"
    assert host.calls == []
