#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: nvidia_persistence
short_description: Keep NVIDIA GPU persistence mode enabled or disabled
version_added: 0.1.0
description:
  - Ensures persistence mode is enabled or disabled on all GPUs of the host or on the GPUs
    given by index or UUID.
  - With O(method=daemon) (the default and NVIDIA's recommendation) persistence is kept by the
    C(nvidia-persistenced) daemon. O(state=enabled) enables and starts its systemd unit; GPUs
    still not persistent afterwards (a unit run with C(--no-persistence-mode), or a subset
    turned off earlier) are switched with C(nvidia-smi -i N -pm 1), which the running daemon
    serves. O(state=disabled) for the whole host stops and disables the unit; for a list of
    GPUs it switches just those with C(nvidia-smi -i N -pm 0).
  - O(method=legacy) only runs C(nvidia-smi -i N -pm 0|1), the driver's deprecated persistence
    mode (the kernel logs "Persistence mode is deprecated and will be removed in a future
    release. Please use nvidia-persistenced instead."); the module warns when it is used.
  - Fails clearly when no NVIDIA driver is loaded or no GPU is present.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: Reports per GPU what persistence would be, and the planned commands, without running them.
  diff_mode:
    support: full
    description: Shows the unit state and every GPU's persistence before and after.
options:
  state:
    description: Whether persistence mode must be on or off.
    type: str
    choices: [enabled, disabled]
    default: enabled
  gpus:
    description:
      - GPU indexes (numbers or strings) or UUIDs to manage. All GPUs when omitted.
      - With O(method=daemon) and O(state=enabled) the daemon still makes every GPU persistent.
    type: list
    elements: raw
  method:
    description:
      - V(daemon) uses C(nvidia-persistenced) through systemd.
      - V(legacy) uses the deprecated C(nvidia-smi -pm) persistence mode; only when asked for.
    type: str
    choices: [daemon, legacy]
    default: daemon
  service_name:
    description: Name of the systemd unit of the persistence daemon.
    type: str
    default: nvidia-persistenced
requirements:
  - The NVIDIA driver with C(nvidia-smi); systemd and the C(nvidia-persistenced) unit for O(method=daemon).
notes:
  - Ubuntu's packaged unit runs C(nvidia-persistenced --no-persistence-mode); the module then
    enables persistence per GPU through the daemon and warns that it will not survive a reboot
    until the flag is removed (for example with a systemd drop-in overriding C(ExecStart)).
seealso:
  - module: gpucloud.fleet.nvidia_gpu_facts
  - name: NVIDIA Driver Persistence
    description: Persistence mode and the persistence daemon.
    link: https://docs.nvidia.com/deploy/driver-persistence/
"""

EXAMPLES = r"""
- name: Keep all GPUs initialised through nvidia-persistenced
  gpucloud.fleet.nvidia_persistence:
    state: enabled

- name: Show what would change, per GPU, without changing anything
  gpucloud.fleet.nvidia_persistence:
    state: enabled
  check_mode: true
  diff: true

- name: Turn persistence off on two GPUs only
  gpucloud.fleet.nvidia_persistence:
    state: disabled
    gpus:
      - "2"
      - GPU-4fc604de-9030-742c-d69f-594418e871d5

- name: Use the deprecated driver persistence mode on a host without systemd
  gpucloud.fleet.nvidia_persistence:
    state: enabled
    method: legacy
"""

RETURN = r"""
state:
  description: The requested state.
  returned: always
  type: str
  sample: enabled
method:
  description: The mechanism used.
  returned: always
  type: str
  sample: daemon
gpus:
  description: Every GPU with its persistence before and after (predicted in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
    uuid:
      description: GPU UUID.
      type: str
    target:
      description: Whether the GPU was selected by O(gpus) (all are when O(gpus) is omitted).
      type: bool
    before:
      description: V(enabled), V(disabled), or V(null) when the GPU does not report it.
      type: str
    after:
      description: Same after the run; in check mode, what it would be.
      type: str
  sample: [{index: 0, uuid: GPU-4fc604de-9030-742c-d69f-594418e871d5, target: true, before: disabled, after: enabled}]
service:
  description: The daemon's unit, V(active) and V(enabled) before and after; V(null) with O(method=legacy).
  returned: always
  type: dict
  sample: {name: nvidia-persistenced, before: {active: false, enabled: false}, after: {active: true, enabled: true}}
commands:
  description: The commands run, or in check mode the commands that would run.
  returned: always
  type: list
  elements: str
  sample: ["enable nvidia-persistenced", "start nvidia-persistenced"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.persistence import (
    Persistence,
    PersistenceError,
    diff,
)
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import Runner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="enabled", choices=["enabled", "disabled"]),
            gpus=dict(type="list", elements="raw"),
            method=dict(type="str", default="daemon", choices=["daemon", "legacy"]),
            service_name=dict(type="str", default="nvidia-persistenced"),
        ),
        supports_check_mode=True,
    )
    manager = Persistence(
        run=Runner(module),
        smi=module.get_bin_path("nvidia-smi"),
        systemctl=module.get_bin_path("systemctl") if module.params["method"] == "daemon" else None,
        service_name=module.params["service_name"],
    )
    try:
        result = manager.ensure(
            module.params["state"],
            module.params["gpus"],
            module.params["method"],
            module.check_mode,
        )
    except PersistenceError as exc:
        module.fail_json(msg=str(exc), commands=manager.commands)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(diff=diff(result), **result)


if __name__ == "__main__":
    main()
