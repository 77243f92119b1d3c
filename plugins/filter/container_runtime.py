# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: nvidia_container_toolkit_packages.yml, docker_nvidia_runtime.yml and
# nvidia_cdi_plan.yml beside this file. The decisions live in
# plugins/plugin_utils/container_toolkit.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.container_toolkit import (
    cdi_plan,
    cdi_record,
    gpu_layout,
    loaded_driver_version,
    package_upstream_version,
    parse_cdi_record,
    plan_docker_daemon,
    toolkit_packages,
    validate_cdi_spec,
)

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None


def nvidia_container_toolkit_packages(version, pkg_mgr, revision="1"):
    """The four NVIDIA Container Toolkit packages pinned to VERSION-REVISION."""
    try:
        return toolkit_packages(str(version), pkg_mgr, str(revision))
    except ValueError as exc:
        raise AnsibleFilterError("nvidia_container_toolkit_packages: %s" % exc) from exc


def docker_nvidia_runtime(current_text, runtime_path="/usr/bin/nvidia-container-runtime", set_as_default=False):
    """Plan /etc/docker/daemon.json with the nvidia runtime: {text, changed, summary, config}."""
    if current_text is not None and not isinstance(current_text, str):
        raise AnsibleFilterError("docker_nvidia_runtime: expected daemon.json's text, got %s"
                                 % type(current_text).__name__)
    try:
        return plan_docker_daemon(current_text, runtime_path, set_as_default)
    except ValueError as exc:
        raise AnsibleFilterError("docker_nvidia_runtime: %s" % exc) from exc


def nvidia_cdi_plan(spec_text, proc_text="", package_version="", recorded="", reboot_required=False,
                    kind="nvidia.com/gpu", gpu_list=""):
    """Whether to (re)generate the CDI spec: {action, driver, reason, errors, record}."""
    spec_exists = spec_text is not None
    errors = []
    if spec_exists:
        try:
            spec = yaml.safe_load(spec_text)
        except yaml.YAMLError as exc:
            spec = None
            errors = ["it is not YAML (%s)" % str(exc).splitlines()[0]]
        except RecursionError:
            spec = None
            errors = ["it nests too deeply to be read"]
        if not errors:
            errors = validate_cdi_spec(spec, kind)
    try:
        recorded_driver, recorded_layout = parse_cdi_record(recorded)
        layout = gpu_layout(gpu_list or "")
        plan = cdi_plan(loaded_driver_version(proc_text or ""), package_upstream_version(package_version or ""),
                        recorded_driver, spec_exists, errors, bool(reboot_required), layout, recorded_layout)
    except ValueError as exc:
        raise AnsibleFilterError("nvidia_cdi_plan: %s" % exc) from exc
    plan["errors"] = errors
    plan["record"] = cdi_record(plan["driver"], layout) if plan["driver"] else ""
    return plan


class FilterModule(object):
    def filters(self):
        return {
            "nvidia_container_toolkit_packages": nvidia_container_toolkit_packages,
            "docker_nvidia_runtime": docker_nvidia_runtime,
            "nvidia_cdi_plan": nvidia_cdi_plan,
        }
