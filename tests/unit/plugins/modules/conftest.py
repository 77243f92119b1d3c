# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one harness for module tests: run a module's main(), fake commands, captures, fake pynvml.

Tests outside this folder import the helpers from here too
(``from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import
fixture_text``); pytest loads the file as a conftest for this folder, which adds the fixtures.
"""

import json
import os
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
H200 = os.path.join(FIXTURES, "h200-ubuntu2404-driver580")


def fixture_path(*parts):
    """The path of a capture under tests/fixtures/."""
    return os.path.join(FIXTURES, *parts)


def fixture_text(*parts):
    """A capture's text, line endings as captured."""
    with open(fixture_path(*parts), newline="") as handle:
        return handle.read()


class FakeCommands:
    """The commands a module may run: answers ``run_command`` from a table and records each call.

    A key is either a whole argv (a tuple: answers exactly that command) or one
    binary (a path such as ``"/usr/sbin/ibstat"``: answers every command run
    with it).  Every binary named in the table is found by ``get_bin_path``;
    any other command raises AssertionError, so a test notices a command
    nobody expected.  ``calls`` holds ``(argv, environ_update)`` in order.
    """

    def __init__(self, table=None):
        self.table = {}
        for key, answer in (table or {}).items():
            self.table[key if isinstance(key, str) else tuple(key)] = answer
        self.calls = []

    def binaries(self):
        """{name: path} of every binary the table names."""
        paths = [key if isinstance(key, str) else key[0] for key in self.table]
        return dict((path.rsplit("/", 1)[-1], path) for path in paths)

    def __call__(self, argv, environ_update=None):
        argv = list(argv)
        self.calls.append((argv, environ_update or {}))
        answer = self.table.get(tuple(argv), self.table.get(argv[0]))
        if answer is None:
            raise AssertionError("unexpected command %r" % (argv,))
        return answer


class AnsibleExitJson(Exception):
    """exit_json was called; args[0] is the result."""


class AnsibleFailJson(Exception):
    """fail_json was called; args[0] is the result."""


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise AnsibleExitJson(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs["failed"] = True
    kwargs["msg"] = msg
    raise AnsibleFailJson(kwargs)


def run_module(module, args, check_mode=False, commands=None, binaries=()):
    """Run ``module.main()`` with ``args``; return its result (``failed: True`` when it failed).

    ``commands`` stands in for every ``run_command``: a FakeCommands, or any
    callable ``(argv, environ_update) -> (rc, out, err)`` (FakeGpuHost).
    ``get_bin_path`` finds the binaries a FakeCommands names, and the names in
    ``binaries`` (in /usr/bin); a missing required one fails as in Ansible.
    Warnings land in ``result["warnings"]``; the result must be JSON, as
    Ansible would send it back.
    """
    params = dict(args)
    if check_mode:
        params["_ansible_check_mode"] = True
    found = dict((name, "/usr/bin/" + name) for name in binaries)
    if isinstance(commands, FakeCommands):
        found.update(commands.binaries())
    warnings = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        if name in found:
            return found[name]
        if required:
            self.fail_json(msg="Failed to find required executable %s" % name)
        return None

    def run_command(self, argv, environ_update=None, **kwargs):
        if commands is None:
            raise AssertionError("unexpected command %r" % (argv,))
        return commands(list(argv), environ_update or {})

    def warn(self, warning):
        warnings.append(warning)

    with patch_module_args(params):
        with mock.patch.multiple(
            basic.AnsibleModule,
            exit_json=_exit_json,
            fail_json=_fail_json,
            get_bin_path=get_bin_path,
            run_command=run_command,
            warn=warn,
        ):
            result = None
            try:
                module.main()
            except (AnsibleExitJson, AnsibleFailJson) as exc:
                result = exc.args[0]
    if result is None:
        raise AssertionError("main() returned without exit_json or fail_json")
    result["warnings"] = warnings
    json.dumps(result)
    return result


NVML_ERROR_NAMES = (
    "NVMLError_Uninitialized",
    "NVMLError_InvalidArgument",
    "NVMLError_NotSupported",
    "NVMLError_NoPermission",
    "NVMLError_NotFound",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibraryNotFound",
    "NVMLError_FunctionNotFound",
    "NVMLError_GpuIsLost",
    "NVMLError_ArgumentVersionMismatch",
    "NVMLError_Unknown",
)

# nvml-dump.json keys of the calls that take a clock type.
_CLOCKS = {0: "graphics", 1: "sm", 2: "mem"}


class Struct:
    """Attribute access to a captured NVML struct (PciInfo, MemoryInfo)."""

    def __init__(self, fields):
        self.__dict__.update(fields)


class FakeNvml:
    """A stand-in for the ``pynvml`` module answering from an NVML capture.

    Built from ``nvml-dump.json`` of the H200 host: every call the capture
    holds returns its recorded value or raises its recorded NVMLError.
    ``extra`` adds answers the capture does not hold (each test says where
    they come from); a call in neither raises AssertionError, so a test
    notices when the code asks NVML something nobody recorded.
    """

    def __init__(self, dump, extra=None, init_error=None, shutdown_error=None):
        self.NVMLError = type("NVMLError", (Exception,), {})
        for name in NVML_ERROR_NAMES:
            setattr(self, name, type(name, (self.NVMLError,), {}))
        self.dump = dump
        self.extra = extra or {}
        self.init_error = init_error
        self.shutdown_error = shutdown_error
        self.initialised = False
        self.shutdowns = 0
        self.calls = []

    def _answer(self, entry):
        if "error" in entry:
            raise getattr(self, entry["error"])()
        return entry["ok"]

    def nvmlInit(self):
        if self.init_error:
            raise getattr(self, self.init_error)()
        self.initialised = True

    def nvmlShutdown(self):
        self.shutdowns += 1
        self.initialised = False
        if self.shutdown_error:
            raise getattr(self, self.shutdown_error)()

    def _system(self, key):
        assert self.initialised, "NVML called before nvmlInit"
        return self._answer(self.dump["system"][key])

    def nvmlSystemGetDriverVersion(self):
        return self._system("driver")

    def nvmlSystemGetNVMLVersion(self):
        return self._system("nvml")

    def nvmlSystemGetCudaDriverVersion(self):
        return self._system("cuda_driver")

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self._system("cuda_driver_v2")

    def nvmlDeviceGetCount(self):
        return self._system("count")

    def nvmlDeviceGetHandleByIndex(self, index):
        assert self.initialised, "NVML called before nvmlInit"
        return ("handle", index)

    def _device(self, handle, key, *args):
        assert self.initialised, "NVML called before nvmlInit"
        self.calls.append((key,) + args)
        index = handle[1]
        entry = self.extra.get((index, key))
        if callable(entry):
            return entry(*args)
        if entry is None:
            device = self.dump["devices"][index]
            if key not in device:
                raise AssertionError("NVML call %s is not in the capture; give it in extra" % key)
            entry = device[key]
            if key in ("ClockInfo", "MaxClockInfo", "ApplicationsClock", "DefaultApplicationsClock"):
                entry = entry[_CLOCKS[args[0]]]
        value = self._answer(entry)
        if key in ("PciInfo", "MemoryInfo"):
            return Struct(value)
        return value

    def __getattr__(self, name):
        prefix = "nvmlDeviceGet"
        if not name.startswith(prefix):
            raise AttributeError(name)
        key = name[len(prefix):]

        def call(handle, *args, **kwargs):
            if kwargs:
                raise AssertionError("%s called with %r, which the capture does not cover" % (name, kwargs))
            return self._device(handle, key, *args)

        return call


def h200_dump():
    with open(os.path.join(H200, "nvml-dump.json")) as handle:
        return json.load(handle)


def h200_extra():
    """Answers the H200 capture lacks, for the same host.

    CpuAffinity/MemoryAffinity: the capture kept only the repr of NVML's
    bitmask arrays; the bits here say CPUs 0-15 and NUMA node 0, which is
    what that host's ``nvidia-smi topo -m`` printed.
    RetiredPagesPendingStatus: not captured; page retirement is Not Supported
    on that GPU (RetiredPages), so its pending status is taken as Not
    Supported too.
    GpuMaxPcieLinkGeneration: not captured; 5, the ``max_device_link_gen`` of
    the same host's ``nvidia-smi -q -x``.
    """
    return {
        (0, "GpuMaxPcieLinkGeneration"): {"ok": 5},
        (0, "CpuAffinity"): lambda words: [0xFFFF] + [0] * (words - 1),
        (0, "MemoryAffinity"): lambda words, scope: [1] + [0] * (words - 1),
        (0, "RetiredPagesPendingStatus"): {"error": "NVMLError_NotSupported"},
    }


def fake_h200_nvml(**kwargs):
    return FakeNvml(h200_dump(), extra=h200_extra(), **kwargs)


H200_CSV_LINE = "0, GPU-4fc604de-9030-742c-d69f-594418e871d5, Enabled"
DRIVER_NOT_LOADED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
UBUNTU_EXEC_START = (
    "{ path=/usr/bin/nvidia-persistenced ; argv[]=/usr/bin/nvidia-persistenced --user nvidia-persistenced "
    "--no-persistence-mode --verbose ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; "
    "code=(null) ; status=0/0 }"
)
NVIDIA_EXEC_START = (
    "{ path=/usr/bin/nvidia-persistenced ; argv[]=/usr/bin/nvidia-persistenced --verbose ; ignore_errors=no ; "
    "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
)


class FakeGpuHost:
    """A GPU host as nvidia-smi and systemctl see it, changing as they are told.

    Models what the module relies on: the daemon enables persistence on every
    GPU when it starts (unless its unit has --no-persistence-mode), the
    persistence it holds ends when it stops, ``nvidia-smi -pm`` is served by
    the daemon when it runs and falls back to the deprecated driver mode
    otherwise (which the driver logs).
    """

    def __init__(self, persistence=(False,), driver="loaded", unit="loaded", active=False, enabled=False,
                 exec_start=NVIDIA_EXEC_START, root=True):
        self.gpus = [
            {
                "index": index,
                "uuid": "GPU-%08x-0000-0000-0000-%012x" % (index, index),
                "bus_id": "00000000:%02X:00.0" % (0x18 + index),
                "persistence": state,
                "by_daemon": False,
            }
            for index, state in enumerate(persistence)
        ]
        self.driver = driver
        self.unit = unit
        self.active = active
        self.enabled = enabled
        self.exec_start = exec_start
        self.root = root
        self.commands = []
        self.dmesg = []

    def __call__(self, argv, environ_update=None):
        self.commands.append(argv)
        name = argv[0].rsplit("/", 1)[-1]
        if name == "nvidia-smi":
            return self._smi(argv[1:])
        if name == "systemctl":
            return self._systemctl(argv[1:])
        raise AssertionError("unexpected command %r" % (argv,))

    def changes(self):
        """The commands that change something."""
        return [
            " ".join([argv[0].rsplit("/", 1)[-1]] + argv[1:])
            for argv in self.commands
            if "-pm" in argv or argv[1:2] in (["start"], ["stop"], ["enable"], ["disable"])
        ]

    def _smi(self, args):
        if self.driver == "not-loaded":
            return 9, DRIVER_NOT_LOADED, ""
        if self.driver == "no-gpu" or not self.gpus:
            return 6, "No devices were found\n", ""
        if args == ["--query-gpu=index,uuid,persistence_mode", "--format=csv,noheader"]:
            return 0, "".join(
                "%d, %s, %s\n" % (gpu["index"], gpu["uuid"], "[N/A]" if gpu["persistence"] is None else
                                  "Enabled" if gpu["persistence"] else "Disabled")
                for gpu in self.gpus), ""
        if len(args) == 4 and args[0] == "-i" and args[2] == "-pm":
            gpu = self.gpus[int(args[1])]
            if not self.root:
                return 4, ("Unable to set persistence mode for GPU %s: Insufficient Permissions\n"
                           "Terminating early due to previous errors.\n" % gpu["bus_id"]), ""
            gpu["persistence"] = args[3] == "1"
            gpu["by_daemon"] = self.active and gpu["persistence"]
            if gpu["persistence"] and not self.active:
                self.dmesg.append("NVRM: Persistence mode is deprecated and will be removed in a future release. "
                                  "Please use nvidia-persistenced instead.")
            return 0, "%s persistence mode for GPU %s.\nAll done.\n" % (
                "Enabled" if gpu["persistence"] else "Disabled", gpu["bus_id"]), ""
        raise AssertionError("unexpected nvidia-smi arguments %r" % (args,))

    def _systemctl(self, args):
        if args[0] == "show":
            if self.unit != "loaded":
                return 0, "LoadState=not-found\nActiveState=inactive\nUnitFileState=\nExecStart=\n", ""
            return 0, "LoadState=loaded\nActiveState=%s\nUnitFileState=%s\nExecStart=%s\n" % (
                "active" if self.active else "inactive",
                "enabled" if self.enabled else "disabled",
                self.exec_start,
            ), ""
        if not self.root:
            return 1, "", "Failed to %s %s: Access denied\n" % (args[0], args[1])
        if args[0] == "start" and not self.active:
            self.active = True
            if "--no-persistence-mode" not in self.exec_start:
                for gpu in self.gpus:
                    gpu["persistence"], gpu["by_daemon"] = True, True
        elif args[0] == "stop" and self.active:
            self.active = False
            for gpu in self.gpus:
                if gpu["by_daemon"]:
                    gpu["persistence"], gpu["by_daemon"] = False, False
        elif args[0] in ("enable", "disable"):
            self.enabled = args[0] == "enable"
        return 0, "", ""

    def persistence(self):
        return [gpu["persistence"] for gpu in self.gpus]


@pytest.fixture
def fake_commands():
    """A FakeCommands with an empty table, for a test that fills ``fake_commands.table`` itself."""
    return FakeCommands()
