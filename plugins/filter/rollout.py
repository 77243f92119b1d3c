# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: rollout_plan.yml, rollout_stage_skips.yml and rollout_node_problems.yml beside this file. Logic: plugin_utils/rollout.py.


from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import rollout
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.plain_data import plain


def rollout_plan(hosts, profile_groups, groups, serial):
    if isinstance(hosts, (str, Mapping)) or not hasattr(hosts, '__iter__'):
        raise AnsibleFilterError("rollout_plan: expected a list of hosts, got %s" % type(hosts).__name__)
    if isinstance(profile_groups, (str, Mapping)) or not hasattr(profile_groups, '__iter__'):
        raise AnsibleFilterError("rollout_plan: gpucloud_profile_groups must be a list of group names, got %r"
                                 % (profile_groups,))
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("rollout_plan: groups must be a mapping group -> hosts, got %s" % type(groups).__name__)
    try:
        return rollout.plan(list(hosts), list(profile_groups),
                            dict((str(k), [str(h) for h in v or []]) for k, v in groups.items()), serial)
    except (rollout.RolloutError, TypeError) as exc:
        raise AnsibleFilterError("rollout_plan: %s" % exc) from exc


def rollout_stage_skips(stages, enabled, reasons=None, run_tags=None, skip_tags=None):
    try:
        return rollout.stage_skips(stages, enabled, dict(reasons) if isinstance(reasons, Mapping) else reasons,
                                   run_tags, skip_tags)
    except (rollout.RolloutError, TypeError) as exc:
        raise AnsibleFilterError("rollout_stage_skips: %s" % exc) from exc


def rollout_node_problems(host, group_names, profile_groups, profile, version_lock, stages, required=None):
    try:
        return rollout.node_problems(str(host), [str(group) for group in group_names or []],
                                     None if profile_groups is None else [str(group) for group in profile_groups],
                                     plain(profile), plain(version_lock), [str(stage) for stage in stages or []],
                                     plain(required) or {})
    except (TypeError, KeyError) as exc:
        raise AnsibleFilterError("rollout_node_problems: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"rollout_plan": rollout_plan, "rollout_stage_skips": rollout_stage_skips,
                "rollout_node_problems": rollout_node_problems}
