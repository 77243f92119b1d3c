# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run a module's main() in-process with given arguments and capture its result."""


import contextlib
import json
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core < 2.19
    @contextlib.contextmanager
    def patch_module_args(args=None):
        serialized = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}))
        with mock.patch.object(basic, "_ANSIBLE_ARGS", serialized):
            yield


class ModuleExit(Exception):
    """Raised instead of exit_json; .result holds the module's result."""

    def __init__(self, result):
        super(ModuleExit, self).__init__(result)
        self.result = result


class ModuleFail(Exception):
    """Raised instead of fail_json; .result holds the module's result, msg included."""

    def __init__(self, result):
        super(ModuleFail, self).__init__(result.get("msg"))
        self.result = result


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    kwargs["warnings"] = list(getattr(self, "_captured_warnings", []))
    raise ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs["failed"] = True
    kwargs["msg"] = msg
    kwargs["warnings"] = list(getattr(self, "_captured_warnings", []))
    raise ModuleFail(kwargs)


def _warn(self, warning):
    if not hasattr(self, "_captured_warnings"):
        self._captured_warnings = []
    self._captured_warnings.append(warning)


class FakeCommands(object):
    """Stand-in for get_bin_path/run_command: maps a binary name to (rc, stdout, stderr)."""

    def __init__(self, outputs):
        self.outputs = dict(outputs)
        self.calls = []

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        if arg in self.outputs:
            return "/usr/sbin/" + arg
        assert not required, "the module asked for a required binary; it must handle a missing one itself"
        return None

    def run_command(self, args, **kwargs):
        self.calls.append((list(args), kwargs))
        return self.outputs[args[0].rsplit("/", 1)[-1]]


def run_module(main, args, commands=None):
    """Run main() with args; return (kind, result) where kind is 'exit' or 'fail'."""
    commands = commands or FakeCommands({})
    patches = [
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        mock.patch.object(basic.AnsibleModule, "warn", _warn),
        # Bound methods of another object: the module instance is not passed on.
        mock.patch.object(basic.AnsibleModule, "get_bin_path", commands.get_bin_path),
        mock.patch.object(basic.AnsibleModule, "run_command", commands.run_command),
    ]
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        stack.enter_context(patch_module_args(args))
        try:
            main()
        except ModuleExit as exc:
            return "exit", exc.result
        except ModuleFail as exc:
            return "fail", exc.result
    raise AssertionError("the module returned without calling exit_json or fail_json")
