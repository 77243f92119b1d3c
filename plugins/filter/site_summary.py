# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: site_verdict.yml beside this file. Logic: plugin_utils/site_summary.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import site_summary


def site_verdict(checks, failure=None):
    try:
        return site_summary.node_verdict(checks, failure)
    except site_summary.SiteVerdictError as exc:
        raise AnsibleFilterError("site_verdict: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"site_verdict": site_verdict}
