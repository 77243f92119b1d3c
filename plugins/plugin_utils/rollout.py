# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The order in which site.yml rolls out GPU nodes, and its batch sizes.

A canary batch must exercise every hardware profile present: the first node of each
profile (inventory order) goes first, the other nodes follow in inventory order.
A rollout asks for a canary with a ``serial`` list whose first entry is 1 and which has
further entries (``[1, "10%", "25%"]``); its first entry becomes the number of profiles
present, so that the canary batch holds those first nodes. Pure: no Ansible objects.
"""


import re

# A serial entry: a whole number of hosts, or a percentage of the play's hosts.
# Whole numbers only, as Ansible's own ``serial`` reads them, and no surrounding space.
_COUNT_RE = re.compile(r"[0-9]+")
_PERCENT_RE = re.compile(r"[0-9]+%")


class RolloutError(ValueError):
    """The hosts, profiles or serial cannot give a rollout order."""


def _serial_entry(entry):
    """1, "1", "10%" -> 1, 1, "10%"; anything else (0, -1, True, "x", 1.5, "150%", " 5") raises."""
    if isinstance(entry, bool):
        raise RolloutError("rollout_serial entry %r is not a number of hosts or a percentage" % (entry,))
    if isinstance(entry, int):
        number = entry
    elif isinstance(entry, str) and _COUNT_RE.fullmatch(entry):
        number = int(entry)
    elif isinstance(entry, str) and _PERCENT_RE.fullmatch(entry):
        if not 1 <= int(entry[:-1]) <= 100:
            raise RolloutError("rollout_serial entry %r must be a percentage from 1%% to 100%%" % (entry,))
        return entry
    else:
        raise RolloutError("rollout_serial entry %r is not a number of hosts or a whole percentage like \"25%%\""
                           % (entry,))
    if number <= 0:
        raise RolloutError("rollout_serial entry %r must be at least 1" % (entry,))
    return number


def serial_list(serial):
    """rollout_serial as a list of entries (a single value is a list of one, as Ansible's
    ``serial`` reads it)."""
    entries = serial if isinstance(serial, (list, tuple)) else [serial]
    if not entries:
        raise RolloutError("rollout_serial is empty: give a number of hosts, a percentage or a list of them")
    return [_serial_entry(entry) for entry in entries]


def asks_for_canary(serial):
    """A list starting with 1 and going on is a canary; a lone 1 is one node at a time."""
    entries = serial_list(serial)
    return len(entries) > 1 and entries[0] == 1


def host_profiles(hosts, profile_groups, groups):
    """host -> its one profile group; a host in none or several raises, naming them."""
    profile_of = {}
    for host in hosts:
        found = [profile for profile in profile_groups if host in (groups.get(profile) or [])]
        if len(found) != 1:
            raise RolloutError(
                "%s is in the profile groups %s; a GPU node belongs to exactly one of %s"
                % (host, found, list(profile_groups)))
        profile_of[host] = found[0]
    return profile_of


def plan(hosts, profile_groups, groups, serial):
    """The rollout order and serial for HOSTS (the play's hosts, inventory order, --limit applied).

    PROFILE_GROUPS lists the hardware-profile groups, GROUPS maps a group to its hosts
    (Ansible's ``groups``), SERIAL is rollout_serial. Returns a dict:
    ``order`` (canaries first, then the rest in inventory order), ``canaries`` (the first
    node of each profile present), ``profiles`` (those present, in PROFILE_GROUPS order),
    ``serial`` (SERIAL as a list, its canary entry widened to one node per profile) and
    ``canary`` (whether SERIAL asks for one).
    """
    hosts = [str(host) for host in hosts]
    if len(set(hosts)) != len(hosts):
        raise RolloutError("hosts are listed more than once: %s" % sorted(set(h for h in hosts if hosts.count(h) > 1)))
    profile_groups = [str(profile) for profile in profile_groups]
    profile_of = host_profiles(hosts, profile_groups, groups)
    canaries = []
    profiles = []
    for profile in profile_groups:
        members = [host for host in hosts if profile_of[host] == profile]
        if members:
            profiles.append(profile)
            canaries.append(members[0])
    entries = serial_list(serial)
    canary = asks_for_canary(entries)
    if canary:
        entries = [max(len(profiles), 1)] + entries[1:]
    return {
        "order": canaries + [host for host in hosts if host not in canaries],
        "canaries": canaries,
        "profiles": profiles,
        "serial": entries,
        "canary": canary,
    }


def _tag_selected(tag, run_tags, skip_tags):
    """Whether a task tagged only TAG runs under --tags RUN_TAGS --skip-tags SKIP_TAGS (Ansible's rule)."""
    run_tags = set(run_tags or ["all"])
    skip_tags = set(skip_tags or [])
    if not ({"all", "tagged", tag} & run_tags):
        return False
    return not ({"all", "tagged", tag} & skip_tags)


def stage_skips(stages, enabled, reasons=None, run_tags=None, skip_tags=None):
    """The skip message of every stage of STAGES that ENABLED (rollout_stages) leaves out.

    Only the stages the run's tags select are named (RUN_TAGS, SKIP_TAGS: Ansible's
    ansible_run_tags and ansible_skip_tags; a stage's tag is its name), as the stage's own task
    would have said it; REASONS maps a stage to why it is skipped.
    """
    if any(isinstance(names, (str, dict)) or not hasattr(names, "__iter__") for names in (stages, enabled)):
        raise RolloutError("the stages and rollout_stages must be lists of stage names, got %r and %r"
                           % (stages, enabled))
    reasons = {} if reasons is None else reasons
    if not isinstance(reasons, dict):
        raise RolloutError("rollout_skip_reasons must be a mapping stage -> reason, got %r" % (reasons,))
    enabled = [str(stage) for stage in enabled]
    return ["stage %s SKIPPED: not in rollout_stages (%s)"
            % (stage, reasons.get(stage) or "no reason given; set rollout_skip_reasons.%s" % stage)
            for stage in (str(s) for s in stages)
            if stage not in enabled and _tag_selected(stage, run_tags, skip_tags)]


def _jinja_integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def node_problems(host, group_names, profile_groups, profile, version_lock, stages, required=None):
    """Why preflight refuses GPU node HOST, each message naming what to set: an empty list when none.

    GROUP_NAMES are the host's groups, PROFILE_GROUPS gpucloud_profile_groups (None: unset),
    PROFILE gpucloud_profile, VERSION_LOCK gpucloud_version_lock, STAGES rollout_stages and
    REQUIRED the host's values of the profile's required_vars (name -> value, None when unset).
    In order, as the checks build on each other: exactly one profile group; a complete profile
    named like it and a version lock (with a driver when nvidia_driver runs); then every required
    variable set and not empty.
    """
    mine = [group for group in group_names if group in (profile_groups or [])]
    if profile_groups is None or len(mine) != 1:
        return ["%s is in the profile groups %s; a GPU node belongs to exactly one of %s" % (
            host, mine, "(gpucloud_profile_groups is not set)" if profile_groups is None else list(profile_groups))]
    group = mine[0]
    complete = (
        isinstance(profile, dict)
        and profile.get("name") == group
        and _jinja_integer(profile.get("gpu_count"))
        and isinstance(version_lock, dict)
        and ("nvidia_driver" not in stages or len(str(version_lock.get("driver") or "")) > 0)
        and (profile["gpu_count"] == 0 or len(str(profile.get("gpu_model") or "")) > 0))
    if not complete:
        return ["%s: group_vars/%s.yml must set gpucloud_profile (name equal to the group, gpu_count, gpu_model when "
                "gpu_count > 0) and gpucloud_version_lock (driver at least); see docs/operator-guide.md, \"Adding a "
                "hardware profile\"" % (host, group)]
    return ["%s: profile %s requires %s, which is empty or unset" % (host, profile["name"], name)
            for name, value in (required or {}).items() if not value]
