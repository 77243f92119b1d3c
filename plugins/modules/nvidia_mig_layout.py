#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: nvidia_mig_layout
short_description: Bring NVIDIA GPUs to a hardware profile's MIG layout
version_added: 0.1.0
description:
  - Reads every GPU's MIG mode (C(nvidia-smi -q -x)) and GPU instances (C(nvidia-smi mig -lgi)),
    compares them with the profile's C(mig) key (V(false), or C({strategy, layout, profiles}) with
    a layout such as V(all-1g.10gb)) and changes nothing when they match.
  - Otherwise refuses while compute processes run on the GPUs
    (C(nvidia-smi --query-compute-apps)) unless O(allow_busy=true), then applies the layout with
    C(nvidia-mig-parted apply) (O(tool=mig-parted)) or with C(nvidia-smi) (O(tool=nvidia-smi), MIG
    mode first, then C(mig -dci) and C(-dgi) of other instances and C(mig -cgi <profiles> -C)).
  - A MIG mode change that stays pending needs a GPU reset or a reboot; the module reports
    RV(reset_required) and creates no instances until the mode is current.
  - With O(tool=mig-parted) every C(apply) carries C(--skip-reset), and a mode change is applied alone
    (C(--mode-only)). Without NVIDIA's hooks file a GPU reset fails on GPUs that nvidia-persistenced,
    DCGM or Fabric Manager hold, so the pending mode is left for a reboot (RV(reset_required)), and
    the instances are made by the next run once the mode is current.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: Reports whether the layout differs and the commands that would run first.
  diff_mode:
    support: full
    description: Shows the per-GPU MIG mode and instances before and after.
options:
  profile:
    description: The hardware profile (C(gpucloud_profile)); only C(mig) and C(name) are read.
    type: dict
    required: true
  tool:
    description: What applies the layout.
    type: str
    choices: [nvidia-smi, mig-parted]
    default: nvidia-smi
  config_file:
    description: The nvidia-mig-parted config file holding the layout (O(tool=mig-parted)).
    type: path
  mig_parted:
    description: Path or name of the C(nvidia-mig-parted) binary.
    type: str
    default: nvidia-mig-parted
  allow_busy:
    description: Change the layout even while compute processes run on the GPUs (they will fail).
    type: bool
    default: false
requirements:
  - The NVIDIA driver with C(nvidia-smi); C(nvidia-mig-parted) for O(tool=mig-parted).
seealso:
  - name: NVIDIA Multi-Instance GPU User Guide
    description: MIG modes, profiles and instance management.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  - name: nvidia-mig-parted
    description: The MIG partition editor and its config format.
    link: https://github.com/NVIDIA/mig-parted
"""

EXAMPLES = r"""
- name: Apply the profile's MIG layout with nvidia-smi
  gpucloud.fleet.nvidia_mig_layout:
    profile: "{{ gpucloud_profile }}"
  register: mig

- name: Apply it with nvidia-mig-parted from a rendered config
  gpucloud.fleet.nvidia_mig_layout:
    profile: "{{ gpucloud_profile }}"
    tool: mig-parted
    config_file: /etc/gpucloud/mig-parted.yaml
"""

RETURN = r"""
layout:
  description: The layout of the profile (V(all-disabled) for C(mig=false)).
  returned: always
  type: str
  sample: all-1g.10gb
before:
  description: The judgement before the run (C(matches) and per GPU C(ok), C(reasons), C(want), C(have)).
  returned: always
  type: dict
after:
  description: The judgement after the run (equal to RV(before) in check mode or without change).
  returned: always
  type: dict
commands:
  description: Commands run; in check mode the commands that would run first.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi -i 0 -mig 1", "nvidia-mig-parted apply --mode-only --skip-reset -f /etc/gpucloud/mig-parted.yaml -c all-1g.10gb"]
reset_required:
  description: A MIG mode is set but pending; a GPU reset or reboot makes it current.
  returned: always
  type: bool
busy:
  description: Compute processes found on the GPUs when a change was due.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.mig_layout import MigLayoutError, ensure
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import CommandError, Runner


def _summary(judged):
    return "\n".join("GPU%s: %s" % (gpu["index"], "; ".join(gpu["reasons"]) or "as wanted")
                     for gpu in judged["gpus"]) + "\n"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="dict", required=True),
            tool=dict(type="str", default="nvidia-smi", choices=["nvidia-smi", "mig-parted"]),
            config_file=dict(type="path"),
            mig_parted=dict(type="str", default="nvidia-mig-parted"),
            allow_busy=dict(type="bool", default=False),
        ),
        required_if=[("tool", "mig-parted", ("config_file",))],
        supports_check_mode=True,
    )
    run = Runner(module)
    run.find("nvidia-smi", required=True)
    params = module.params
    layout_name = None
    if params["tool"] == "mig-parted":
        mig = params["profile"].get("mig")
        layout_name = mig.get("layout") if isinstance(mig, dict) else "all-disabled"
    try:
        result = ensure(run, params["profile"], tool=params["tool"], config_file=params["config_file"],
                        config_name=layout_name, mig_parted=params["mig_parted"],
                        allow_busy=params["allow_busy"], check_mode=module.check_mode)
    except (MigLayoutError, CommandError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(diff={"before": _summary(result["before"]), "after": _summary(result["after"])}, **result)


if __name__ == "__main__":
    main()
