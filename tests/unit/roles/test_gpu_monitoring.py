# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/gpu_monitoring: its templates rendered as ansible.builtin.template renders them, and
tasks/validate.yml refusing bad values by name (one ansible-playbook run on localhost; nothing
changes: set_vars.yml and validate.yml only read)."""


import os
import re
import sys

import jinja2
import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.test_gpu_metrics import (
    parse_exposition,
    promtool_check,
)
from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ROOT, ansible_env, case_play, run_cases

ROLE = os.path.join(ROOT, "roles", "gpu_monitoring")


def role_vars(**overrides):
    """The role's defaults and vars, with the profile of the example inventory's H200 SXM nodes."""
    variables = {}
    for name in ("defaults/main.yml", "vars/main.yml", "vars/Debian.yml"):
        with open(os.path.join(ROLE, name)) as handle:
            variables.update(yaml.safe_load(handle))
    variables.update({
        "ansible_managed": "managed",
        "gpu_monitoring_profile_name": "h200_sxm", "gpu_monitoring_gpus_expected": 8,
        "gpu_monitoring_gpu_temp_limit_celsius": 85, "gpu_monitoring_nvlinks_expected_per_gpu": 18,
        "__gpu_monitoring_source": "collector", "__gpu_monitoring_in_container": False,
        "__gpu_monitoring_collector_python": "/usr/local/lib/gpucloud-gpu-collector/venv/bin/python3",
    })
    variables.update(overrides)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    # The paths in vars/main.yml refer to each other: resolve them the way Ansible would.
    for _round in range(3):
        for key, value in list(variables.items()):
            if isinstance(value, str) and "{{" in value and "gpucloud_" not in value and "nvidia_driver" not in value:
                variables[key] = env.from_string(value).render(**variables)
    return variables


def render(template, **overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["bool"] = lambda value: str(value).lower() in ("true", "yes", "1", "on")
    return env.get_template(template).render(**role_vars(**overrides))


def unit_settings(text):
    settings = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def test_profile_series_are_valid_exposition_text():
    text = render("gpucloud-node.prom.j2") + "\n"
    families = parse_exposition(text.replace("\n\n", "\n"))
    promtool_check(text.replace("\n\n", "\n"))
    assert {name: family["samples"] for name, family in families.items()} == {
        "gpucloud_node_gpus_expected": [({}, 8.0)],
        "gpucloud_node_profile_info": [({"profile": "h200_sxm"}, 1.0)],
        "gpucloud_node_gpu_temp_limit_celsius": [({}, 85.0)],
        "gpucloud_node_nvlinks_expected_per_gpu": [({}, 18.0)],
    }


def test_node_exporter_arguments():
    text = render("prometheus-node-exporter.default.j2", gpu_monitoring_node_exporter_extra_args=["--collector.systemd"])
    assert ('ARGS="--collector.textfile.directory=/var/lib/prometheus/node-exporter --web.listen-address=:9100 '
            '--collector.systemd"') in text.splitlines()


def test_collector_unit_for_metal_nvml():
    settings = unit_settings(render("gpucloud-gpu-collector.service.j2"))
    assert settings["ExecStart"] == [
        "/usr/local/lib/gpucloud-gpu-collector/venv/bin/python3 -I -B /usr/local/bin/gpucloud-gpu-collector "
        "--lib-dir /usr/local/lib/gpucloud-gpu-collector --textfile /var/lib/prometheus/node-exporter/gpucloud-gpu.prom "
        "--source auto --kernel-log /dev/kmsg --xid-state /var/lib/gpucloud-gpu-collector/state/xid-state.json "
        "--interval 15"]
    assert settings["User"] == ["gpucloud-gpu-collector"] and settings["SupplementaryGroups"] == ["video"]
    assert settings["AmbientCapabilities"] == ["CAP_SYSLOG"] and settings["CapabilityBoundingSet"] == ["CAP_SYSLOG"]
    assert settings["ReadWritePaths"] == ["/var/lib/prometheus/node-exporter"]
    # The Xid counts survive a restart in a directory systemd makes for the collector's user.
    assert settings["StateDirectory"] == ["gpucloud-gpu-collector/state"]
    assert settings["WatchdogSec"] == ["120"] and settings["Type"] == ["notify"]
    # Settings that would shut the NVIDIA devices or /dev/kmsg out, or fail in the lab's containers.
    for absent in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectKernelLogs", "ProtectClock",
                   "DynamicUser", "PrivateTmp"):
        assert absent not in settings, absent
    assert settings["SystemCallFilter"] == ["@system-service"] and settings["RestrictAddressFamilies"] == ["AF_UNIX"]


def test_collector_unit_for_the_lab_replay_and_beside_dcgm():
    lab = unit_settings(render("gpucloud-gpu-collector.service.j2", gpu_monitoring_collector_source="replay",
                               gpu_monitoring_collector_kernel_log="/var/lib/gpucloud-gpu-collector/kern.log",
                               gpu_monitoring_collector_interval=5,
                               __gpu_monitoring_collector_python="/usr/bin/python3"))
    assert lab["ExecStart"][0].startswith("/usr/bin/python3 -I -B ")
    assert "--source replay --replay-file /etc/gpucloud-gpu-collector/replay.csv" in lab["ExecStart"][0]
    assert "--kernel-log /var/lib/gpucloud-gpu-collector/kern.log --xid-state " in lab["ExecStart"][0]
    assert "AmbientCapabilities" not in lab and lab["CapabilityBoundingSet"] == [""]
    # In a container: no seccomp-based setting (systemd 257 fails such a unit at step USER there).
    container = unit_settings(render("gpucloud-gpu-collector.service.j2", __gpu_monitoring_in_container=True))
    for seccomp in ("SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies", "LockPersonality",
                    "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID", "ProtectKernelModules",
                    "ProtectKernelTunables", "ProtectHostname"):
        assert seccomp not in container, seccomp
    assert container["ProtectSystem"] == ["strict"] and container["NoNewPrivileges"] == ["yes"]
    dcgm = unit_settings(render("gpucloud-gpu-collector.service.j2", __gpu_monitoring_source="dcgm"))
    assert dcgm["ExecStart"][0].endswith("--no-dcgm-series")


@pytest.mark.parametrize("mode", ["binary", "container"])
def test_dcgm_exporter_unit(mode):
    settings = unit_settings(render("gpucloud-dcgm-exporter.service.j2", gpu_monitoring_dcgm_exporter_mode=mode,
                                    gpu_monitoring_dcgm_exporter_image="registry.example/dcgm-exporter:4.4.0-4.5.2",
                                    gpu_monitoring_dcgm_exporter_container_args=["--gpus", "all"]))
    start = settings["ExecStart"][0]
    assert start.endswith("--collectors /etc/dcgm-exporter/gpucloud-counters.csv --address :9400 "
                          "--remote-hostengine-info localhost:5555")
    assert settings["Requires"] == ["nvidia-dcgm.service"]
    if mode == "container":
        assert re.match(r"^/usr/bin/podman run --rm --name gpucloud-dcgm-exporter --network host --gpus all --volume ", start)
        assert " registry.example/dcgm-exporter:4.4.0-4.5.2 --collectors " in start
    else:
        assert start.startswith("/usr/local/bin/dcgm-exporter --collectors")


# ---------------------------------------------------------------- validate.yml

VALIDATE = "Refuse values that would break the unit, the node exporter arguments or the textfile"
NUMBERS = "Require whole, non-negative numbers (the interval greater than 0)"
REPLAY = "Require a replay file on the controller for the replay source"
FLOAT = "Refuse a DCGM version that YAML read as a float"
DCGM = "Require what DCGM and dcgm-exporter need"
LAB = {"gpucloud_profile": {"name": "lab_gpu", "gpu_count": 1}, "gpu_monitoring_collector_source": "replay",
       "gpu_monitoring_collector_replay_file": "replay/h200-1gpu-query-gpu.csv",
       "gpu_monitoring_collector_kernel_log": "/var/lib/gpucloud-gpu-collector/kern.log"}

# (case id, variables, task expected to refuse them or None, words its message holds)
CASES = [
    ("lab-replay-ok", LAB, None, []),
    ("replay-controller-path-ok", dict(LAB, gpu_monitoring_collector_replay_file=os.path.join(
        ROLE, "files", "replay", "nvsim-h200-hgx8-query-gpu.csv")), None, []),
    ("replay-missing", dict(LAB, gpu_monitoring_collector_replay_file="replay/absent.csv"), REPLAY,
     ["gpu_monitoring_collector_replay_file", "replay/absent.csv"]),
    ("replay-unset", dict(LAB, gpu_monitoring_collector_replay_file=""), REPLAY, ["header line"]),
    ("textfile-dir-relative", {"gpu_monitoring_textfile_dir": "node-exporter"}, VALIDATE, ["gpu_monitoring_textfile_dir"]),
    ("textfile-dir-space", {"gpu_monitoring_textfile_dir": "/var/lib/x y"}, VALIDATE, ["gpu_monitoring_textfile_dir"]),
    ("textfile-dir-newline", {"gpu_monitoring_textfile_dir": "/var/lib/x\n"}, VALIDATE, ["gpu_monitoring_textfile_dir"]),
    ("extra-arg-quote", {"gpu_monitoring_node_exporter_extra_args": ['--x="a b"']}, VALIDATE,
     ["gpu_monitoring_node_exporter_extra_args"]),
    ("listen-without-port", {"gpu_monitoring_node_exporter_listen_address": "0.0.0.0"}, VALIDATE,
     ["gpu_monitoring_node_exporter_listen_address"]),
    ("profile-name-quote", {"gpu_monitoring_profile_name": 'h200"}'}, VALIDATE, ["gpu_monitoring_profile_name"]),
    ("kernel-log-relative", {"gpu_monitoring_collector_kernel_log": "kmsg"}, VALIDATE,
     ["gpu_monitoring_collector_kernel_log"]),
    ("interval-0", {"gpu_monitoring_collector_interval": 0}, NUMBERS, ["gpu_monitoring_collector_interval"]),
    ("gpus-negative", {"gpu_monitoring_gpus_expected": -1}, NUMBERS, ["gpu_monitoring_gpus_expected"]),
    ("dcgm-version-float", {"gpu_monitoring_dcgm_version": 4.10}, FLOAT, ["gpu_monitoring_dcgm_version", "quote"]),
    ("dcgm-without-exporter", {"gpu_monitoring_gpu_source": "dcgm", "gpu_monitoring_dcgm_version": "4.4.0",
                               "gpu_monitoring_dcgm_cuda_major": "13"}, DCGM, ["gpu_monitoring_dcgm_exporter_url"]),
    ("dcgm-without-version", {"gpu_monitoring_gpu_source": "dcgm", "gpu_monitoring_dcgm_version": "",
                              "gpu_monitoring_dcgm_exporter_mode": "container",
                              "gpu_monitoring_dcgm_exporter_image": "r/dcgm-exporter:4"}, DCGM, ['got ""']),
    # Issue 28 item 13: numbers end where the string ends.
    ("interval-newline", {"gpu_monitoring_collector_interval": "15\n"}, NUMBERS, ["gpu_monitoring_collector_interval"]),
    ("gpus-newline", {"gpu_monitoring_gpus_expected": "8\n"}, NUMBERS, ["gpu_monitoring_gpus_expected"]),
    ("sweep-interval-30", {"gpu_monitoring_health_sweep_interval": 30}, NUMBERS,
     ["gpu_monitoring_health_sweep_interval", "at least 60"]),
    ("sweep-interval-60-ok", dict(LAB, gpu_monitoring_health_sweep=True, gpu_monitoring_health_sweep_interval=60), None, []),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    plays = [case_play(case_id, "gpu_monitoring", variables, tasks_from=("set_vars", "validate"),
                       passed={"source": "{{ __gpu_monitoring_source }}"})
             for case_id, variables, _task, _words in CASES]
    return run_cases(tmp_path_factory.mktemp("gpu_monitoring_validate"), plays,
                     env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))[0]


@pytest.mark.parametrize("case_id,variables,task,words", CASES, ids=[case[0] for case in CASES])
def test_validate_refuses_by_name(outcomes, case_id, variables, task, words):
    outcome = outcomes[case_id]
    assert outcome["task"] == task, outcome
    for word in words:
        assert word in outcome["msg"], outcome


def test_auto_chooses_the_collector_without_a_dcgm_lock(outcomes):
    assert outcomes["lab-replay-ok"]["source"] == "collector"


def test_health_sweep_unit_and_timer():
    unit = unit_settings(render("gpucloud-health-sweep.service.j2", gpu_monitoring_collector_source="replay",
                                gpu_monitoring_gpus_expected="8"))
    assert unit["Type"] == ["oneshot"] and unit["User"] == ["gpucloud-gpu-collector"]
    assert unit["ExecStart"] == [
        "/usr/local/lib/gpucloud-gpu-collector/venv/bin/python3 -I -B /usr/local/bin/gpucloud-gpu-collector "
        "--lib-dir /usr/local/lib/gpucloud-gpu-collector --health-sweep "
        "--textfile /var/lib/prometheus/node-exporter/gpucloud-health.prom "
        "--sweep-state /var/lib/gpucloud-gpu-collector/state/health-sweep.json "
        "--xid-state /var/lib/gpucloud-gpu-collector/state/xid-state.json --expected-gpus 8 "
        "--source replay --replay-file /etc/gpucloud-gpu-collector/replay.csv"]
    # The collector's state directory: the sweep reads the Xid counts the collector keeps there.
    collector = unit_settings(render("gpucloud-gpu-collector.service.j2"))
    assert unit["StateDirectory"] == collector["StateDirectory"]
    assert unit["CapabilityBoundingSet"] == [""] and unit["ReadWritePaths"] == ["/var/lib/prometheus/node-exporter"]
    timer = unit_settings(render("gpucloud-health-sweep.timer.j2", gpu_monitoring_health_sweep_interval=600))
    assert timer["OnUnitActiveSec"] == ["600s"] and timer["OnBootSec"] == ["600s"]
    assert timer["Unit"] == ["gpucloud-health-sweep.service"] and timer["WantedBy"] == ["timers.target"]


def test_health_sweep_is_off_by_default_and_documented():
    with open(os.path.join(ROLE, "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["gpu_monitoring_health_sweep"] is False and defaults["gpu_monitoring_health_sweep_interval"] == 900
    with open(os.path.join(ROLE, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert options["gpu_monitoring_health_sweep"]["default"] is False
    assert options["gpu_monitoring_health_sweep_interval"]["default"] == 900
