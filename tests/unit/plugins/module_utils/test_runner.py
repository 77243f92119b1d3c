# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import CommandError, Runner
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import FakeCommands


class Failed(Exception):
    pass


class FakeModule:
    """The two AnsibleModule methods the runner uses, over a FakeCommands."""

    def __init__(self, table):
        self.commands = FakeCommands(table)
        self.lookups = []
        self.kwargs = []

    def get_bin_path(self, name, required=False):
        self.lookups.append(name)
        path = self.commands.binaries().get(name)
        if path is None and required:
            raise Failed("Failed to find required executable %s" % name)
        return path

    def run_command(self, argv, environ_update=None, **kwargs):
        self.kwargs.append(kwargs)
        return self.commands(argv, environ_update)


SMI = "/usr/bin/nvidia-smi"


def test_finds_the_program_and_runs_it_in_the_c_locale():
    module = FakeModule({(SMI, "topo", "-m"): (0, "matrix\n", "")})
    assert Runner(module)(["nvidia-smi", "topo", "-m"]) == (0, "matrix\n", "")
    assert module.commands.calls == [([SMI, "topo", "-m"], {"LC_ALL": "C"})]


def test_environment_is_added_and_lc_all_stays_c():
    module = FakeModule({"/usr/bin/apt-get": (0, "", "")})
    Runner(module, environ={"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "de_DE.UTF-8"})(["apt-get", "-v"])
    assert module.commands.calls[0][1] == {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}


def test_a_path_is_run_as_given_and_a_program_is_looked_up_once():
    module = FakeModule({"/opt/bin/tool": (0, "", ""), SMI: (0, "", "")})
    runner = Runner(module)
    runner(["/opt/bin/tool", "x"])
    runner(["nvidia-smi", "-L"])
    runner(["nvidia-smi", "-q"])
    assert module.lookups == ["nvidia-smi"]
    assert [call[0] for call in module.commands.calls] == [["/opt/bin/tool", "x"], [SMI, "-L"], [SMI, "-q"]]


def test_a_missing_program_fails_the_module_naming_it():
    module = FakeModule({})
    with pytest.raises(Failed, match="Failed to find required executable ibstat"):
        Runner(module)(["ibstat"])
    assert module.commands.calls == []


def test_a_missing_program_can_be_an_answer():
    module = FakeModule({})
    runner = Runner(module, missing="rc")
    assert runner(["ibstat", "-l"]) == (127, "", "ibstat: command not found")
    assert runner([]) == (127, "", "(empty command): command not found")
    assert module.commands.calls == []


@pytest.mark.parametrize("argv", ["nvidia-smi -q", b"nvidia-smi", None, [], ["nvidia-smi", 1], ("ls", None)])
def test_anything_but_an_argv_list_is_refused(argv):
    module = FakeModule({SMI: (0, "", "")})
    with pytest.raises(CommandError, match="a command must be a non-empty argv list of strings"):
        Runner(module)(argv)
    assert module.commands.calls == []


def test_check_rc_names_the_command_its_status_and_message():
    module = FakeModule({(SMI, "topo", "-m"): (9, "", "couldn't communicate with the NVIDIA driver\n"),
                         (SMI, "-L"): (6, "No devices were found\n", "")})
    runner = Runner(module, check_rc=True)
    with pytest.raises(CommandError) as caught:
        runner(["nvidia-smi", "topo", "-m"])
    assert str(caught.value) == "nvidia-smi topo -m failed (rc=9): couldn't communicate with the NVIDIA driver"
    assert (caught.value.rc, caught.value.argv) == (9, ["nvidia-smi", "topo", "-m"])
    with pytest.raises(CommandError, match=r"^nvidia-smi -L failed \(rc=6\): No devices were found$"):
        runner(["nvidia-smi", "-L"])
    assert runner(["nvidia-smi", "-L"], check_rc=False)[0] == 6


def test_without_check_rc_a_failure_is_returned():
    module = FakeModule({(SMI, "-L"): (6, "No devices were found\n", "")})
    assert Runner(module)(["nvidia-smi", "-L"]) == (6, "No devices were found\n", "")
    with pytest.raises(CommandError):
        Runner(module)(["nvidia-smi", "-L"], check_rc=True)


def test_run_command_options_pass_through():
    module = FakeModule({"/usr/sbin/cryptsetup": (0, "", "")})
    Runner(module)(["cryptsetup", "open", "--test-passphrase", "/dev/x"], data="secret", binary_data=True)
    assert module.kwargs == [{"data": "secret", "binary_data": True}]


def test_program_binds_one_binary_or_is_none():
    module = FakeModule({(SMI, "-q", "-x"): (0, "<xml/>", "")})
    smi = Runner(module).program("nvidia-smi")
    assert smi(["-q", "-x"]) == (0, "<xml/>", "")
    assert module.commands.calls == [([SMI, "-q", "-x"], {"LC_ALL": "C"})]
    assert Runner(module).program("dcgmi") is None


def test_an_unknown_missing_mode_is_refused():
    with pytest.raises(ValueError, match="missing must be one of fail, rc, not 'ignore'"):
        Runner(FakeModule({}), missing="ignore")
