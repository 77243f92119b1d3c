# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: one <filter name>.yml beside this file per filter. The logic and its
# sources live in plugins/plugin_utils/nvidia_packages.py.


import base64
import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nvidia_packages as np


def _filter(name, func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (np.NvidiaPackageError, TypeError, ValueError, AttributeError) as exc:
            raise AnsibleFilterError("%s: %s" % (name, exc)) from exc
    return wrapper


def _files(contents):
    """{path: text} from a dict, or from slurp results (item.path / content base64)."""
    if isinstance(contents, dict):
        return contents
    files = {}
    for result in contents or []:
        if not isinstance(result, dict) or "content" not in result:
            raise np.NvidiaPackageError("expected slurp results (content, source) or a mapping path -> text")
        path = result.get("source") or result.get("item", {}).get("path")
        files[path] = base64.b64decode(result["content"]).decode("utf-8", "replace")
    return files


def nvidia_cuda_sources(contents, repo_uri, own_paths=()):
    return np.find_cuda_sources(_files(contents), repo_uri, tuple(own_paths or ()))


FILTERS = {
    "nvidia_fabric_manager_packages": np.fabric_manager_packages,
    "nvidia_dnf_module_stream": np.dnf_module_stream,
    "nvidia_crb_repository": np.rhel_crb_repository,
    "nvidia_signed_module_packages": np.ubuntu_signed_module_packages,
    "nvidia_needs_unsigned_modules": np.needs_unsigned_modules,
    "nvidia_driver_version_choice": np.choose_driver_version,
    "nvidia_cuda_sources": nvidia_cuda_sources,
    "nvidia_cudnn_packages": np.cudnn_packages,
    "nvidia_nccl_packages": np.nccl_packages,
    "nvidia_version_matches": np.version_matches,
    "nvidia_persistenced_override": np.persistenced_override,
}


class FilterModule(object):
    def filters(self):
        return {name: _filter(name, func) for name, func in FILTERS.items()}
