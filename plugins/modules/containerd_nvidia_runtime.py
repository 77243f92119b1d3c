#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: containerd_nvidia_runtime
short_description: Give containerd an nvidia runtime in its own config file
version_added: 0.1.0
description:
  - Adds (or corrects) the C(nvidia) runtime in containerd's main config file, as
    C(nvidia-ctk runtime configure --runtime=containerd) of the NVIDIA Container Toolkit
    v1.17.8 does, beside C(runc) and with C(runc)'s options, and nothing else.
  - The edit is minimal and textual; every other line of the file, comments included,
    stays. Each planned file is parsed again and must equal the old one plus exactly the
    intended changes, or the module fails and writes nothing.
  - Never writes a C(conf.d) drop-in. On containerd 1.6 and 1.7 a drop-in holding a CRI
    plugin table replaces the main file's whole CRI section (measured with
    C(containerd config dump); tests/fixtures/containerd/measured.source). The files the
    config imports are returned in RV(imports) for the caller to check.
  - An empty or missing file means containerd's built-in defaults; the module then needs
    O(default_config) (the host's C(containerd config default)) as the base, because a file
    naming only the C(nvidia) runtime drops C(runc) on containerd 1.6 and 1.7.
  - The decisions are made by C(plan_nvidia_runtime) in
    plugins/module_utils/containerd_config.py.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: Plans the edit and reports it (RV(summary), diff) without writing.
  diff_mode:
    support: full
    description:
      - The whole file before and after, with the value of every registry credential (C(password),
        C(auth), C(identitytoken), C(registrytoken), and arrays or inline tables holding one)
        replaced by C((redacted)).
options:
  path:
    description:
      - containerd's main config file. A symbolic link is followed and its target written (the new
        file is renamed into the target's folder), so the link stays a link.
    type: path
    default: /etc/containerd/config.toml
  replace_runtime:
    description:
      - An C(nvidia) runtime that is already there keeps its own settings (C(privileged_without_host_devices),
        C(pod_annotations), ...); C(runc)'s fill what it lacks, and C(options.SystemdCgroup) (the node's
        cgroup driver, from C(runc)) and C(options.BinaryName) (O(runtime_path)) are set.
      - One whose C(options.BinaryName) is another binary (a GPU Operator's) is refused by name unless
        V(true); V(true) replaces the whole table with the copy of C(runc), as C(nvidia-ctk) does.
    type: bool
    default: false
  default_config:
    description:
      - The host's C(containerd config default) output. Used only when O(path) is missing
        or empty; required then.
    type: str
  containerd_version:
    description:
      - The host's containerd version (V(1.7.24)). When given, a version 3 file on
        containerd 1.x and O(enable_cdi) on containerd 1.6 are refused.
    type: str
  set_as_default:
    description:
      - Make C(nvidia) the CRI plugin's C(default_runtime_name). V(false) leaves the default
        as it is, whatever it is.
    type: bool
    default: false
  enable_cdi:
    description:
      - Set C(enable_cdi = true) on the CRI plugin (containerd 1.7 and later). V(false)
        leaves the setting as it is.
    type: bool
    default: false
  runtime_path:
    description: The C(nvidia-container-runtime) binary, written as C(options.BinaryName).
    type: path
    default: /usr/bin/nvidia-container-runtime
  cri_imports:
    description:
      - What to do when a file the config imports (C(imports), globs relative to the config's
        folder as containerd resolves them) holds a table of the CRI plugin. On containerd 1.6
        and 1.7 such a file replaces the main file's whole CRI section, so the C(nvidia) runtime
        written here (and C(runc)) would not be in effect.
      - V(fail) refuses before writing anything, naming the files; V(warn) writes and warns.
    type: str
    choices: [fail, warn]
    default: fail
requirements:
  - Python 3.11 on the managed host (C(tomllib)), or the C(tomli) backport (Ubuntu 22.04 - C(python3-tomli)
    from universe, which gpucloud.fleet.container_runtime installs).
notes:
  - containerd reads its config only at start; restart it when the module reports a change. A
    restart leaves running containers and pods alive (their shims keep them); see
    docs/roles/container_runtime.md.
seealso:
  - name: Installing the NVIDIA Container Toolkit
    description: NVIDIA's guide, "Configuring containerd (for Kubernetes)".
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
"""

EXAMPLES = r"""
- name: Read containerd's built-in defaults
  ansible.builtin.command:
    argv: [containerd, config, default]
  register: containerd_default
  changed_when: false
  check_mode: false

- name: Add the nvidia runtime beside runc (default runtime unchanged)
  gpucloud.fleet.containerd_nvidia_runtime:
    default_config: "{{ containerd_default.stdout }}"
    containerd_version: 1.7.24
    enable_cdi: true
  register: containerd_nvidia
  notify: Restart containerd
"""

RETURN = r"""
summary:
  description: What changed, or would change, one line each.
  returned: always
  type: list
  elements: str
  sample: ['added runtime nvidia (a copy of runc with options.BinaryName = "/usr/bin/nvidia-container-runtime")']
config_version:
  description: The config file's C(version) (2 for containerd 1.x, 3 for 2.x).
  returned: success
  type: int
  sample: 2
cri_plugin:
  description: The plugin that holds the runtimes.
  returned: success
  type: str
  sample: io.containerd.grpc.v1.cri
source_runtime:
  description: The runtime whose table the C(nvidia) runtime copies.
  returned: success
  type: str
  sample: runc
imports:
  description: The files the config imports (C(imports)); a CRI table in one of them overrides this file on containerd 1.x.
  returned: success
  type: list
  elements: str
  sample: [/etc/containerd/conf.d/*.toml]
cri_imports:
  description: The imported files that hold a CRI plugin table, with those tables.
  returned: success
  type: dict
  sample: {/etc/containerd/conf.d/gpu.toml: ['plugins."io.containerd.grpc.v1.cri".containerd']}
created:
  description: Whether the file did not exist before.
  returned: always
  type: bool
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpucloud.fleet.plugins.module_utils.containerd_config import (
    cri_tables_in_imports,
    plan_nvidia_runtime,
    redact_secrets,
)


def read_config(path):
    """The file's text, or None when it does not exist; ValueError when it cannot be read."""
    if os.path.isdir(path):
        raise ValueError("%s is a directory, not a config file" % path)
    try:
        with open(path, "rb") as handle:
            return to_text(handle.read(), errors="surrogate_or_strict")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError("%s cannot be read: %s" % (path, exc.strerror or exc)) from exc


def read_imports(path, patterns):
    """{file: text} of every file the imports resolve to (relative to the config's folder)."""
    imported = {}
    for pattern in patterns:
        if not os.path.isabs(pattern):
            pattern = os.path.join(os.path.dirname(path), pattern)
        for name in sorted(glob.glob(pattern)):
            if os.path.isfile(name):
                imported[name] = read_config(name)
    return imported


def write_config(module, path, text, existed):
    # A symlinked config (managed elsewhere, e.g. /etc/containerd/config.toml -> a shared
    # folder) is written through: renaming over the link would leave its target stale.
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    temporary = os.path.join(directory, ".%s.gpucloud-tmp" % os.path.basename(target))
    with open(temporary, "wb") as handle:
        handle.write(to_bytes(text))
    if existed:
        stat = os.stat(target)
        os.chmod(temporary, stat.st_mode & 0o7777)
        os.chown(temporary, stat.st_uid, stat.st_gid)
    else:
        os.chmod(temporary, 0o644)
    module.atomic_move(temporary, target)


def redacted_diff(path, current, after):
    """The diff with registry credentials redacted; an empty diff when the text cannot be read as TOML."""
    header = path if current is not None else "%s (absent)" % path
    try:
        return {"before": redact_secrets(current or "", path), "after": redact_secrets(after, path),
                "before_header": header, "after_header": path}
    except ValueError:
        return {"before": "", "after": "", "before_header": "%s (diff withheld: not TOML)" % path,
                "after_header": path}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/containerd/config.toml"),
            default_config=dict(type="str"),
            containerd_version=dict(type="str"),
            set_as_default=dict(type="bool", default=False),
            enable_cdi=dict(type="bool", default=False),
            runtime_path=dict(type="path", default="/usr/bin/nvidia-container-runtime"),
            cri_imports=dict(type="str", default="fail", choices=["fail", "warn"]),
            replace_runtime=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    try:
        current = read_config(path)
        plan = plan_nvidia_runtime(
            current,
            set_as_default=module.params["set_as_default"],
            runtime_path=module.params["runtime_path"],
            enable_cdi=module.params["enable_cdi"],
            default_text=module.params["default_config"],
            containerd_version=module.params["containerd_version"],
            replace_runtime=module.params["replace_runtime"],
        )
        overriding = cri_tables_in_imports(read_imports(path, plan["imports"]), plan["cri_plugin"])
    except ValueError as exc:
        module.fail_json(msg="%s: %s" % (path, exc) if not str(exc).startswith(path) else str(exc))
    if overriding:
        message = ("%s imports %s, which hold(s) CRI plugin tables (%s): on containerd 1.6/1.7 an imported "
                   "CRI table replaces the main file's whole CRI section, so the nvidia runtime (and runc) "
                   "written to %s would not be in effect. Move those settings into %s."
                   % (path, ", ".join(overriding), "; ".join(t for tables in overriding.values() for t in tables),
                      path, path))
        if module.params["cri_imports"] == "fail":
            module.fail_json(msg=message, imports=plan["imports"], cri_imports=overriding)
        module.warn(message)
    if plan["changed"] and not module.check_mode:
        write_config(module, path, plan["text"], current is not None)
    module.exit_json(
        changed=plan["changed"],
        created=plan["changed"] and current is None,
        summary=plan["summary"],
        config_version=plan["config_version"],
        cri_plugin=plan["cri_plugin"],
        source_runtime=plan["source_runtime"],
        imports=plan["imports"],
        cri_imports=overriding,
        diff=redacted_diff(path, current, plan["text"]),
    )


if __name__ == "__main__":
    main()
