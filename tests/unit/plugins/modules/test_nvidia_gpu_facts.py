# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import json
import os
import subprocess
import sys
from unittest import mock

import pytest
from ansible.module_utils import basic

from ansible_collections.gpucloud.fleet.plugins.modules import nvidia_gpu_facts
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    DRIVER_NOT_LOADED,
    FakeCommands,
    fake_h200_nvml,
    fixture_path,
    fixture_text,
    run_module,
    ROOT,
)

SMI = "/usr/bin/nvidia-smi"
H200_XML = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml")
SMI_H200 = {
    (SMI, "-q", "-x"): (0, H200_XML, ""),
    (SMI, "--query-gpu=index,compute_cap", "--format=csv,noheader"): (0, "0, 9.0\n", ""),
}


@pytest.fixture
def no_pynvml(monkeypatch):
    monkeypatch.setattr(nvidia_gpu_facts, "pynvml", None)
    monkeypatch.setattr(nvidia_gpu_facts, "PYNVML_IMPORT_ERROR", "ImportError: No module named 'pynvml'")


@pytest.fixture
def h200_nvml(monkeypatch):
    nvml = fake_h200_nvml()
    monkeypatch.setattr(nvidia_gpu_facts, "pynvml", nvml)
    return nvml


def test_nvml_facts_and_result(h200_nvml):
    result = run_module(nvidia_gpu_facts, {})
    assert result["changed"] is False
    assert "failed" not in result
    facts = result["ansible_facts"]["nvidia"]
    assert facts["source"] == "nvml"
    assert (facts["driver_version"], facts["cuda_driver_version"], facts["nvml_version"]) == (
        "580.159.04", "13.0", "13.580.159.04")
    assert facts["gpus"][0]["uuid"] == "GPU-4fc604de-9030-742c-d69f-594418e871d5"
    assert facts["gpus"][0]["retired_pages"] is None
    for key, value in facts.items():
        assert result[key] == value
    assert h200_nvml.shutdowns == 1


def test_check_mode_gives_the_same_answer(h200_nvml):
    normal = run_module(nvidia_gpu_facts, {})
    checked = run_module(nvidia_gpu_facts, {}, check_mode=True)
    assert checked == normal


def test_missing_pynvml_falls_back_to_nvidia_smi(no_pynvml):
    commands = FakeCommands(SMI_H200)
    result = run_module(nvidia_gpu_facts, {}, commands=commands, binaries=("nvidia-smi",))
    assert result["source"] == "nvidia-smi"
    assert result["gpus"][0]["compute_capability"] == "9.0"
    assert result["gpus"][0]["memory_used_mib"] == 0
    assert [call[1] for call in commands.calls] == [{"LC_ALL": "C"}, {"LC_ALL": "C"}]


def test_source_nvml_without_pynvml_names_the_package(no_pynvml):
    result = run_module(nvidia_gpu_facts, {"source": "nvml"})
    assert result["failed"] is True
    assert "nvidia-ml-py" in result["msg"]
    assert result["exception"].startswith("ImportError")


def test_source_nvidia_smi_ignores_pynvml(h200_nvml):
    result = run_module(nvidia_gpu_facts, {"source": "nvidia-smi"}, commands=FakeCommands(SMI_H200),
                        binaries=("nvidia-smi",))
    assert result["source"] == "nvidia-smi"
    assert h200_nvml.calls == []


@pytest.mark.parametrize("init_error", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"])
def test_no_driver_is_a_normal_answer(monkeypatch, init_error):
    monkeypatch.setattr(nvidia_gpu_facts, "pynvml", fake_h200_nvml(init_error=init_error))
    result = run_module(nvidia_gpu_facts, {})
    assert "failed" not in result
    assert (result["driver_loaded"], result["gpu_count"], result["gpus"]) == (False, 0, [])
    assert result["ansible_facts"]["nvidia"]["driver_loaded"] is False


@pytest.mark.parametrize("init_error", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"])
def test_no_driver_fails_when_asked_to(monkeypatch, init_error):
    monkeypatch.setattr(nvidia_gpu_facts, "pynvml", fake_h200_nvml(init_error=init_error))
    result = run_module(nvidia_gpu_facts, {"fail_on_missing": True})
    assert result["failed"] is True
    assert result["msg"] == "no NVIDIA driver loaded (source nvml)"
    assert result["gpu_count"] == 0


def test_no_driver_without_pynvml_nor_nvidia_smi(no_pynvml):
    result = run_module(nvidia_gpu_facts, {})
    assert (result["source"], result["driver_loaded"], result["gpu_count"]) == ("nvidia-smi", False, 0)
    assert run_module(nvidia_gpu_facts, {"fail_on_missing": True})["failed"] is True


def test_driver_not_loaded_through_nvidia_smi(no_pynvml):
    commands = FakeCommands({(SMI, "-q", "-x"): (9, DRIVER_NOT_LOADED, "")})
    result = run_module(nvidia_gpu_facts, {"fail_on_missing": True}, commands=commands, binaries=("nvidia-smi",))
    assert result["failed"] is True
    assert result["msg"] == "no NVIDIA driver loaded (source nvidia-smi)"


def test_driver_without_gpu_fails_when_asked_to(no_pynvml):
    commands = FakeCommands({(SMI, "-q", "-x"): (6, "No devices were found\n", "")})
    ok = run_module(nvidia_gpu_facts, {}, commands=commands, binaries=("nvidia-smi",))
    assert (ok["driver_loaded"], ok["gpu_count"]) == (True, 0)
    failed = run_module(nvidia_gpu_facts, {"fail_on_missing": True}, commands=commands, binaries=("nvidia-smi",))
    assert failed["msg"] == "NVIDIA driver (unknown version) is loaded but sees no GPU"


def _kernel_module(monkeypatch, loaded):
    version = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n"
    monkeypatch.setattr(nvidia_gpu_facts, "read_text",
                        lambda path: version if loaded and path == "/proc/driver/nvidia/version" else None)


def test_nvidia_smi_error_fails(no_pynvml, monkeypatch):
    _kernel_module(monkeypatch, loaded=True)
    commands = FakeCommands({(SMI, "-q", "-x"): (15, "", "GPU is lost\n")})
    result = run_module(nvidia_gpu_facts, {}, commands=commands, binaries=("nvidia-smi",))
    assert result["msg"] == "nvidia-smi -q -x failed (rc=15): GPU is lost"


def test_userspace_without_kernel_module_is_no_driver(no_pynvml, monkeypatch):
    # Seen in the lab: Debian's nvidia-smi installed in a container, no kernel module.
    _kernel_module(monkeypatch, loaded=False)
    commands = FakeCommands({(SMI, "-q", "-x"): (255, "Failed to initialize NVML: Unknown Error\n", "")})
    result = run_module(nvidia_gpu_facts, {}, commands=commands, binaries=("nvidia-smi",))
    assert "failed" not in result
    assert (result["driver_loaded"], result["gpu_count"]) == (False, 0)
    failed = run_module(nvidia_gpu_facts, {"fail_on_missing": True}, commands=commands, binaries=("nvidia-smi",))
    assert failed["failed"] is True


def test_lost_gpu_through_nvml_fails(monkeypatch):
    nvml = fake_h200_nvml()
    nvml.extra[(0, "PowerUsage")] = {"error": "NVMLError_GpuIsLost"}
    monkeypatch.setattr(nvidia_gpu_facts, "pynvml", nvml)
    result = run_module(nvidia_gpu_facts, {})
    assert result["failed"] is True
    assert result["msg"].startswith("GPU 0: nvmlDeviceGetPowerUsage failed")


@pytest.mark.parametrize("name, gpus", [
    (("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml"), 1),
    (("h200-ubuntu2404-driver580", "nvidia-smi_-q.txt"), 1),
    (("public", "smi_q", "h100-sxm-8gpu-565-thamada.txt"), 8),
    (("public", "smi_xml", "a100-sxm4-40gb-mig-510-v11-netdata-reindented.txt"), 1),
])
def test_src_reads_a_capture(no_pynvml, name, gpus):
    result = run_module(nvidia_gpu_facts, {"src": fixture_path(*name)})
    assert (result["source"], result["driver_loaded"], result["gpu_count"]) == ("nvidia-smi", True, gpus)


def test_src_errors(no_pynvml, tmp_path):
    assert run_module(nvidia_gpu_facts, {"src": str(tmp_path / "absent.xml")})["msg"].startswith("cannot read src")
    garbage = tmp_path / "garbage.txt"
    garbage.write_text(u"hello\n")
    assert "not nvidia-smi -q output" in run_module(nvidia_gpu_facts, {"src": str(garbage)})["msg"]
    result = run_module(nvidia_gpu_facts, {"src": fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_-q.txt"),
                                           "source": "nvml"})
    assert result["msg"] == "src holds nvidia-smi output; source=nvml cannot read it"


@pytest.mark.parametrize("args, message", [
    ({"source": "dcgm"}, "value of source must be one of: auto, nvml, nvidia-smi, got: dcgm"),
    ({"fail_on_missing": "maybe"}, "fail_on_missing"),
    ({"gpus": [0]}, "Unsupported parameters"),
])
def test_bad_arguments(h200_nvml, args, message):
    result = run_module(nvidia_gpu_facts, args)
    assert result["failed"] is True
    assert message in result["msg"]
    assert h200_nvml.calls == []


@pytest.mark.parametrize("args, deprecated", [({"fail_on_missing": True}, True), ({}, False)])
def test_fail_on_missing_is_deprecated(h200_nvml, args, deprecated):
    with mock.patch.object(basic.AnsibleModule, "deprecate") as deprecate:
        result = run_module(nvidia_gpu_facts, args)
    assert result["gpu_count"] == 1
    if deprecated:
        deprecate.assert_called_once_with(nvidia_gpu_facts.FAIL_ON_MISSING_DEPRECATION, version="1.0.0")
        assert "assert on driver_loaded and gpu_count" in nvidia_gpu_facts.FAIL_ON_MISSING_DEPRECATION
    else:
        deprecate.assert_not_called()


def _ansible(module, args, folder):
    """Run MODULE with ARGS through the real ansible, on localhost, as a playbook task names it."""
    config = folder / "ansible.cfg"
    config.write_text(u"[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_DEPRECATION_WARNINGS="1", ANSIBLE_CONFIG=str(config))
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    done = subprocess.run([ansible, "localhost", "-c", "local", "-i", "localhost,", "-e",
                           "ansible_python_interpreter=" + sys.executable, "-m", module, "-a", args],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("name, deprecated", [("nvidia_gpu_facts", False), ("nvidia_gpu_info", True)])
def test_old_name_still_reaches_the_module_with_a_deprecation(name, deprecated, tmp_path):
    capture = fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml")
    rc, output, stderr = _ansible("gpucloud.fleet." + name, "src=" + capture, tmp_path)
    assert rc == 0, stderr
    result = output["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert (result["source"], result["gpu_count"]) == ("nvidia-smi", 1)
    assert result["ansible_facts"]["nvidia"]["gpus"][0]["name"] == "NVIDIA H200"
    deprecations = [(d["msg"], d.get("version")) for d in result.get("deprecations", [])]
    assert deprecations == ([("gpucloud.fleet.nvidia_gpu_info has been deprecated. use gpucloud.fleet.nvidia_gpu_facts,"
                              " the same module under its *_facts name.", "1.0.0")] if deprecated else [])
