# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu_sharing role's plan: every check of its inputs and every value it derives from them.

One call (filter ``gpu_sharing_plan``, in ``roles/gpu_sharing/tasks/validate.yml``) replaces the
role's chain of assert and set_fact tasks. Errors raise ``GpuSharingPlanError`` naming the variable.
"""

import re

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import device_plugin_config as dpc

MIG_TOOLS = ("nvidia-smi", "mig-parted")
# fullmatch, not '$': '$' also matches before a trailing newline, which would reach the unit's Environment=.
_PERCENT_RE = re.compile(r"[0-9]+")
_MEM_LIMIT_RE = re.compile(r"[0-9]+=[0-9]+[KMGT]?(,[0-9]+=[0-9]+[KMGT]?)*")


class GpuSharingPlanError(ValueError):
    """An input of the gpu_sharing role that the role refuses."""


def _whole(value, name):
    if isinstance(value, bool) or value is None:
        raise GpuSharingPlanError("%s must be a whole number, got %r" % (name, value))
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError as exc:
        raise GpuSharingPlanError("%s must be a whole number, got %r" % (name, value)) from exc


def mig_parted_config_text(profile):
    """YAML text of the nvidia-mig-parted v1 config holding the profile's layout."""
    model = profile.get("gpu_model")
    family = mig_layout.family_of(model)
    if family is None:
        if profile.get("mig"):
            raise mig_layout.MigLayoutError("gpu_model %r is not a MIG GPU this collection knows (%s)"
                                            % (model, ", ".join(mig_layout.FAMILIES)))
        family = mig_layout.FAMILIES[0]
    return mig_layout.render_mig_parted_config(mig_layout.mig_parted_config(profile, family))


def _thread_percentage(settings, mode, sharing):
    value = settings.get("gpu_sharing_mps_active_thread_percentage")
    if value is None:
        if mode != "mps":
            return 0
        replicas = _whole(sharing.get("replicas"), "gpucloud_profile.sharing.replicas")
        if replicas < 1:
            raise GpuSharingPlanError("gpucloud_profile.sharing.replicas must be at least 1, got %r" % replicas)
        return 100 // replicas
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and _PERCENT_RE.fullmatch(value))) \
            or not 0 <= int(value) <= 100:
        raise GpuSharingPlanError("gpu_sharing_mps_active_thread_percentage must be a whole number 0-100 (got %r)"
                                  % (value,))
    return int(value)


def _mem_limit(settings, mode, profile, sharing):
    value = settings.get("gpu_sharing_mps_pinned_device_mem_limit")
    if value is None:
        memory = _whole(profile.get("gpu_memory_mib_min", 0), "gpucloud_profile.gpu_memory_mib_min")
        if mode != "mps" or memory <= 0:
            return ""
        count = _whole(profile.get("gpu_count", 0), "gpucloud_profile.gpu_count")
        replicas = _whole(sharing.get("replicas", 1), "gpucloud_profile.sharing.replicas")
        if replicas < 1:
            raise GpuSharingPlanError("gpucloud_profile.sharing.replicas must be at least 1, got %r" % replicas)
        return ",".join("%d=%dM" % (ordinal, memory // replicas) for ordinal in range(count))
    if not isinstance(value, str) or (value and not _MEM_LIMIT_RE.fullmatch(value)):
        raise GpuSharingPlanError('gpu_sharing_mps_pinned_device_mem_limit must be "<ordinal>=<limit>[,...]" '
                                  "like 0=16G,1=16G (got %r)" % (value,))
    return value


def gpu_sharing_plan(profile, settings):
    """Check the profile and the role's settings; return what the role's tasks read.

    PROFILE is ``gpucloud_profile``; SETTINGS maps the role's variables (``gpu_sharing_mig_tool``,
    ``gpu_sharing_mig_parted_version``, ``gpu_sharing_mps_host_daemon``,
    ``gpu_sharing_mps_active_thread_percentage``, ``gpu_sharing_mps_pinned_device_mem_limit``) to
    their values. Returns ``mode`` (none, time-slicing or mps), ``mig_wanted``, ``mig_layout`` (the
    mig-parted config name), ``mig_config`` (the mig-parted config's text), ``mps_wanted``,
    ``mps_thread_percentage`` (0 means unset) and ``mps_mem_limit`` ('' means unset).
    """
    if not isinstance(profile, dict):
        raise GpuSharingPlanError("gpucloud_profile must be the node's hardware profile (group_vars/<profile>.yml), "
                                  "got %r" % (profile,))
    if not isinstance(settings, dict):
        raise GpuSharingPlanError("the settings must be a mapping of gpu_sharing_* variables, got %r" % (settings,))
    # The device plugin's config builder refuses what the plugin refuses (MPS with MIG, fewer
    # than 2 replicas, unknown keys in mig/sharing): one set of rules for the host and the cluster.
    try:
        dpc.device_plugin_config(profile)
    except ValueError as exc:
        raise GpuSharingPlanError("gpucloud_profile: %s" % exc) from exc
    # A layout the profile's GPU model does not have (all-1g.10gb on an H200), a single strategy
    # over several profiles, profiles the layout does not create, a name with a newline.
    try:
        mig_config = mig_parted_config_text(profile)
    except mig_layout.MigLayoutError as exc:
        raise GpuSharingPlanError("gpucloud_profile: %s" % exc) from exc

    tool = settings.get("gpu_sharing_mig_tool")
    if tool not in MIG_TOOLS:
        raise GpuSharingPlanError("gpu_sharing_mig_tool must be nvidia-smi or mig-parted (got %r)" % (tool,))
    if tool == "mig-parted" and not str(settings.get("gpu_sharing_mig_parted_version") or ""):
        raise GpuSharingPlanError("gpu_sharing_mig_parted_version must pin the mirror's nvidia-mig-parted package "
                                  "with gpu_sharing_mig_tool=mig-parted")

    sharing = profile.get("sharing") or {}
    mode = sharing.get("mode", "none")
    mig = profile.get("mig", False)
    return {
        "mode": mode,
        "mig_wanted": isinstance(mig, dict),
        "mig_layout": mig.get("layout") if isinstance(mig, dict) else "all-disabled",
        "mig_config": mig_config,
        "mps_wanted": mode == "mps" and bool(settings.get("gpu_sharing_mps_host_daemon")),
        "mps_thread_percentage": _thread_percentage(settings, mode, sharing),
        "mps_mem_limit": _mem_limit(settings, mode, profile, sharing),
    }
