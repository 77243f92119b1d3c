# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""container_toolkit: packages and pins, the driver version, the CDI decision and checks, daemon.json."""


import json
import os
import re
import sys

import pytest

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.container_toolkit import (
    cdi_device_names,
    cdi_plan,
    loaded_driver_version,
    package_upstream_version,
    plan_docker_daemon,
    toolkit_packages,
    validate_cdi_spec,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "nvsim"))

import nvsim_ctk  # noqa: E402  pylint: disable=wrong-import-position

NVSIM_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
              "(gpucloud-lab-stand-in)  Tue Dec  1 00:00:00 UTC 2026\nGCC version:  gcc version 12.2.0\n")
NVSIM_PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  Tue Dec  1 2026 (gpucloud-lab-stand-in)\n"


def test_packages_are_pinned_as_nvidias_install_guide_says():
    assert toolkit_packages("1.17.8", "apt") == [
        "nvidia-container-toolkit=1.17.8-1", "nvidia-container-toolkit-base=1.17.8-1",
        "libnvidia-container-tools=1.17.8-1", "libnvidia-container1=1.17.8-1"]
    assert toolkit_packages("1.17.8", "dnf")[3] == "libnvidia-container1-1.17.8-1"
    assert toolkit_packages("1.18.0~rc.1", "apt", "1~gpucloudsim1")[0] == "nvidia-container-toolkit=1.18.0~rc.1-1~gpucloudsim1"


@pytest.mark.parametrize("version,pkg_mgr,revision,message", [
    ("1.17", "apt", "1", "not a release"),
    (1.17, "apt", "1", "not a release"),
    ("1.17.8", "zypper", "1", "only apt and dnf"),
    ("1.17.8", "apt", "1 2", "revision"),
])
def test_packages_refuse_bad_input(version, pkg_mgr, revision, message):
    with pytest.raises(ValueError, match=message):
        toolkit_packages(version, pkg_mgr, revision)


def test_loaded_driver_from_the_real_h200_capture_and_both_nvsim_flavours():
    assert loaded_driver_version(fixture_text("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt")) == "580.159.04"
    assert loaded_driver_version(NVSIM_OPEN) == "580.95.05"
    assert loaded_driver_version(NVSIM_PROPRIETARY) == "550.163.01"
    assert loaded_driver_version("") is None
    with pytest.raises(ValueError, match="no 'NVRM version' line"):
        loaded_driver_version("garbage\n")


@pytest.mark.parametrize("package,upstream", [
    ("580.95.05-1~gpucloudsim1", "580.95.05"),
    ("535.261.03-1~deb12u1", "535.261.03"),
    ("580.95.05-0ubuntu0.24.04.2", "580.95.05"),
    ("3:580.82.07-1.el9", "580.82.07"),
    ("580.82.07", "580.82.07"),
    ("", None),
])
def test_package_upstream_version(package, upstream):
    assert package_upstream_version(package) == upstream


def test_package_upstream_version_refuses_a_non_driver_version():
    with pytest.raises(ValueError, match="does not start with a driver version"):
        package_upstream_version("1.17.8-1")


@pytest.mark.parametrize("args,action,reason", [
    (dict(loaded="580.95.05", installed="580.95.05", recorded="", spec_exists=False), "generate", "no CDI spec yet"),
    (dict(loaded=None, installed="580.95.05", recorded="", spec_exists=False), "generate",
     "installed driver package \\(no module loaded\\)"),
    (dict(loaded="580.95.05", installed=None, recorded="550.163.01", spec_exists=True), "generate",
     "made for driver 550.163.01, the loaded kernel module is 580.95.05"),
    (dict(loaded="580.95.05", installed=None, recorded="", spec_exists=True), "generate", "does not say which driver"),
    (dict(loaded="580.95.05", installed=None, recorded="580.95.05", spec_exists=True, spec_errors=["devices is empty"]),
     "generate", "not valid \\(devices is empty\\)"),
    (dict(loaded="580.95.05", installed="550.163.01", recorded="580.95.05", spec_exists=True), "keep", "loaded kernel module"),
    (dict(loaded="550.163.01", installed="580.95.05", recorded="550.163.01", spec_exists=True, reboot_required=True),
     "skip", "reboot is pending"),
    (dict(loaded=None, installed=None, recorded="", spec_exists=False), "skip", "no NVIDIA driver"),
])
def test_cdi_plan(args, action, reason):
    plan = cdi_plan(**args)
    assert plan["action"] == action
    assert re.search(reason, plan["reason"]), plan["reason"]


def test_cdi_plan_loaded_wins_over_installed():
    # After an upgrade without reboot the loaded module is what containers get.
    assert cdi_plan("550.163.01", "580.95.05", "", False)["driver"] == "550.163.01"


def test_cdi_plan_refuses_a_bad_version():
    with pytest.raises(ValueError, match="installed driver version"):
        cdi_plan(None, "1.17.8", "", False)


def good_spec():
    return nvsim_ctk.build_spec("h200-hgx8", "580.95.05")


def test_the_stand_in_spec_is_valid_cdi():
    spec = good_spec()
    assert validate_cdi_spec(spec, "nvidia.com/gpu") == []
    names = cdi_device_names(spec)
    assert len(names) == 17 and names[0] == "nvidia.com/gpu=0" and names[-1] == "nvidia.com/gpu=all"


@pytest.mark.parametrize("edit,error", [
    (lambda s: s.pop("cdiVersion"), "cdiVersion is missing"),
    (lambda s: s.update(cdiVersion="0.9.9"), "not a CDI version"),
    (lambda s: s.update(kind="nvidia.com"), "not VENDOR/CLASS"),
    (lambda s: s.update(kind="-nvidia.com/gpu"), "not VENDOR/CLASS"),
    (lambda s: s.update(kind="nvidia.com/gpu_"), "not VENDOR/CLASS"),
    (lambda s: s.update(kind="nvidia.com/mig"), "not 'nvidia.com/gpu'"),
    (lambda s: s.update(devices=[]), "devices is empty"),
    (lambda s: s["devices"].append({"name": "0", "containerEdits": {"env": ["A=1"]}}), "'0' appears twice"),
    (lambda s: s["devices"].append({"name": "bad/name", "containerEdits": {"env": ["A=1"]}}), "not a CDI device name"),
    (lambda s: s["devices"].append({"name": "x:", "containerEdits": {"env": ["A=1"]}}), "not a CDI device name"),
    (lambda s: s["devices"].append({"name": "empty", "containerEdits": {}}), "edits nothing"),
    (lambda s: s["devices"].append({"name": "none"}), "containerEdits is missing"),
])
def test_cdi_spec_errors(edit, error):
    spec = good_spec()
    edit(spec)
    errors = validate_cdi_spec(spec, "nvidia.com/gpu")
    assert len(errors) == 1 and re.search(error, errors[0]), errors


def test_cdi_spec_not_a_mapping():
    assert validate_cdi_spec(None) == ["the spec is not a mapping"]


def test_cdi_device_names_may_have_colons_and_dots():
    spec = good_spec()
    spec["devices"].append({"name": "MIG-GPU-1:0.1", "containerEdits": {"env": ["A=1"]}})
    assert validate_cdi_spec(spec) == []


DAEMON = """{
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m"},
  "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}},
  "live-restore": true
}
"""


def test_docker_adds_the_runtime_and_keeps_every_other_key_in_order():
    plan = plan_docker_daemon(DAEMON, "/usr/bin/nvidia-container-runtime")
    assert plan["changed"] is True
    config = json.loads(plan["text"])
    assert list(config) == ["log-driver", "log-opts", "runtimes", "live-restore"]
    assert config["runtimes"] == {"kata": {"path": "/usr/bin/kata-runtime"},
                                  "nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}
    assert "default-runtime" not in config
    assert plan["text"].startswith('{\n    "log-driver"')  # four spaces, as nvidia-ctk's Save
    again = plan_docker_daemon(plan["text"], "/usr/bin/nvidia-container-runtime")
    assert again["changed"] is False and again["text"] == plan["text"] and again["summary"] == []


def test_docker_default_runtime_only_when_asked():
    plan = plan_docker_daemon(None, "/usr/bin/nvidia-container-runtime", set_as_default=True)
    assert json.loads(plan["text"]) == {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}},
                                        "default-runtime": "nvidia"}
    assert plan["summary"][-1] == 'default-runtime: null -> "nvidia"'
    kept = plan_docker_daemon('{"default-runtime": "runc"}', "/usr/bin/nvidia-container-runtime")
    assert json.loads(kept["text"])["default-runtime"] == "runc"


def test_docker_replaces_a_different_nvidia_entry_whole():
    text = '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": ["--debug"]}}}'
    plan = plan_docker_daemon(text, "/usr/bin/nvidia-container-runtime")
    assert json.loads(plan["text"])["runtimes"]["nvidia"] == {"path": "/usr/bin/nvidia-container-runtime", "args": []}
    assert plan["summary"] == ['replaced runtime nvidia (path "/usr/bin/nvidia-container-runtime")']


def test_docker_keeps_a_correct_file_byte_for_byte():
    text = '{"runtimes":{"nvidia":{"path":"/usr/bin/nvidia-container-runtime","args":[]}}}'
    assert plan_docker_daemon(text, "/usr/bin/nvidia-container-runtime") == {
        "text": text, "changed": False, "summary": [], "config": json.loads(text)}


@pytest.mark.parametrize("text,message", [
    ("{", "not valid JSON"),
    ("[]", "must hold a JSON object"),
    ('{"runtimes": []}', "runtimes must be an object"),
])
def test_docker_refuses_what_dockerd_would_refuse(text, message):
    with pytest.raises(ValueError, match=message):
        plan_docker_daemon(text, "/usr/bin/nvidia-container-runtime")


def test_docker_refuses_a_relative_runtime_path():
    with pytest.raises(ValueError, match="absolute path"):
        plan_docker_daemon("", "nvidia-container-runtime")


# --- Issue 28 item 13 (in these files): whole-string checks, a trailing newline is refused ------------

@pytest.mark.parametrize("call", [
    lambda: toolkit_packages("1.17.8\n", "apt"),
    lambda: toolkit_packages("1.17.8", "apt", "1\n"),
    lambda: package_upstream_version("580.95.05-1\nx"),
    lambda: cdi_plan("580.95.05\n", None, "", False),
    lambda: cdi_plan(None, "580.95.05\n", "", False),
])
def test_a_trailing_newline_is_not_a_version(call):
    with pytest.raises(ValueError):
        call()
