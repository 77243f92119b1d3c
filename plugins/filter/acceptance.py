# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: acceptance_*.yml beside this file. Logic: plugin_utils/acceptance.py, module_utils/xid.py.


from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.module_utils import xid
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.plain_data import plain


def acceptance_checks(observed, host, profile, lock=None):
    try:
        return acceptance.evaluate(str(host), plain(profile), plain(lock) or {}, plain(observed) or {})
    except (acceptance.AcceptanceError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("acceptance_checks: %s" % exc) from exc


def acceptance_fleet(results, expected=None):
    if not isinstance(results, Mapping):
        raise AnsibleFilterError("acceptance_fleet: expected a mapping host -> list of checks, got %s"
                                 % type(results).__name__)
    try:
        return acceptance.fleet_report(plain(results), [str(h) for h in expected or []])
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("acceptance_fleet: malformed check list: %s" % exc) from exc


def acceptance_markdown(data, host=None):
    """Markdown of one host's checks (give host) or of an acceptance_fleet report."""
    data = plain(data)
    if host is not None:
        return acceptance.host_markdown(str(host), data)
    if not isinstance(data, dict) or "failures" not in data:
        raise AnsibleFilterError("acceptance_markdown: give a host's check list and its name, or a fleet report")
    return acceptance.fleet_markdown(data)


def acceptance_observed(observation, cuda=None, burn_in=None):
    """node_observation's observation plus the CUDA context and burn-in runs, ready for acceptance_checks."""
    if not isinstance(observation, Mapping):
        raise AnsibleFilterError("acceptance_observed: expected the node_observation module's observation (a "
                                 "mapping), got %s" % type(observation).__name__)
    if burn_in is not None and not isinstance(burn_in, Mapping):
        raise AnsibleFilterError("acceptance_observed: burn_in must be the burn-in task's result (rc, stdout, "
                                 "stderr), got %s" % type(burn_in).__name__)
    try:
        return acceptance.observed(plain(observation), None if cuda is None else str(cuda), plain(burn_in))
    except acceptance.AcceptanceError as exc:
        raise AnsibleFilterError("acceptance_observed: %s" % exc) from exc


def acceptance_settings_problems(profile, host, overrides=None, renamed_set=None, renamed=None, captures=None,
                                 firewall_probe=None, fabric_manager_probe=None, burn_in_seconds=None):
    """node_acceptance's input checks in one: the list of what is wrong, each naming its variable."""
    return acceptance.settings_problems(
        str(host), plain(profile), plain({} if overrides is None else overrides),
        [str(name) for name in renamed_set or []], plain(renamed) or {}, plain(captures) or {},
        plain(firewall_probe), plain(fabric_manager_probe), burn_in_seconds)


def acceptance_xid_summary(text, as_text=False):
    summary = xid.summarize(str(text or ""))
    return xid.summary_text(summary) if as_text else summary


class FilterModule(object):
    def filters(self):
        return {
            "acceptance_checks": acceptance_checks,
            "acceptance_fleet": acceptance_fleet,
            "acceptance_markdown": acceptance_markdown,
            "acceptance_observed": acceptance_observed,
            "acceptance_settings_problems": acceptance_settings_problems,
            "acceptance_xid_summary": acceptance_xid_summary,
        }
