# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: site_verdict.yml and site_reports.yml beside this file. Logic: plugin_utils/site_summary.py.


from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import site_summary
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.plain_data import plain


def site_verdict(checks, failure=None):
    try:
        return site_summary.node_verdict(checks, failure)
    except site_summary.SiteVerdictError as exc:
        raise AnsibleFilterError("site_verdict: %s" % exc) from exc


def site_reports(nodes, stages_all, stages_enabled, skip_reasons=None, check_mode=False, expected=None, checks=None,
                 report_dir=""):
    if not isinstance(nodes, Mapping):
        raise AnsibleFilterError("site_reports: expected a mapping host -> site_node_summary, got %s" % type(nodes).__name__)
    try:
        return site_summary.reports(plain(nodes), list(stages_all), list(stages_enabled), plain(skip_reasons) or {},
                                    bool(check_mode), [str(host) for host in expected or []],
                                    None if checks is None else plain(checks), str(report_dir))
    except (site_summary.SiteVerdictError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("site_reports: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"site_verdict": site_verdict, "site_reports": site_reports}
