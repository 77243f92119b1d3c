# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A node's one-line rollout verdict for site.yml's summary and its stop-on-failure task.

A failed stage wins; a node that verify never judged is "not verified"; checks that all
pass but some wait for a reboot say so (the GPU checks run after it); otherwise the node is
accepted or the failed checks are named. The rows are node_acceptance's ``verify_checks``
(plugin_utils/acceptance.py's checks: {check, ok, status, ...}). Pure: no Ansible objects.
"""

import json
from collections.abc import Mapping

PENDING = "pending"


class SiteVerdictError(ValueError):
    """The checks cannot give a verdict."""


def node_verdict(checks, failure=None):
    """'FAILED in ...', 'not verified', 'reboot required (...)', 'accepted' or 'FAILED acceptance: ...'.

    checks: verify_checks, or None when verify did not judge the node; failure: site_failure
    (where the node failed), or None when no stage failed.
    """
    if failure is not None:
        return "FAILED in %s" % (failure,)
    if checks is None:
        return "not verified"
    if isinstance(checks, (str, Mapping)) or not hasattr(checks, "__iter__"):
        raise SiteVerdictError("verify_checks must be a list of checks, got %r" % (checks,))
    failed = []
    pending = False
    for row in checks:
        if not isinstance(row, Mapping) or "ok" not in row:
            raise SiteVerdictError("every verify_checks row needs 'ok' (and 'check'), got %r" % (row,))
        if not row["ok"]:
            failed.append(str(row.get("check", "?")))
        elif row.get("status") == PENDING:
            pending = True
    if failed:
        return "FAILED acceptance: " + ", ".join(failed)
    if pending:
        return "reboot required (GPU checks wait for it)"
    return "accepted"


def reports(nodes, stages_all, stages_enabled, skip_reasons=None, check_mode=False, expected=None, checks=None,
            report_dir=""):
    """Everything site.yml writes and shows about the rollout, computed once: {files, lines, fleet}.

    NODES, STAGES_ALL, STAGES_ENABLED, SKIP_REASONS, CHECK_MODE and EXPECTED are those of
    acceptance.site_summary_markdown. CHECKS maps host -> verify_checks of the nodes verify
    judged, or is None when the run has no fleet table (verify left out or not tagged): with
    it, the fleet report (acceptance.fleet_report over EXPECTED) is written as fleet.json and
    fleet.md beside the summary and shown first. FILES maps a file name in the report
    directory to its content (site-summary.md, site-summary.json, and the fleet files);
    LINES is what the run prints.
    """
    # Imported here: acceptance is the larger module, and node_verdict callers need none of it.
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance

    if not isinstance(nodes, Mapping):
        raise SiteVerdictError("the node summaries must be a mapping host -> site_node_summary, got %r" % (nodes,))
    if checks is not None and not isinstance(checks, Mapping):
        raise SiteVerdictError("the fleet's checks must be a mapping host -> verify_checks, got %r" % (checks,))
    nodes = dict(nodes)
    expected = [str(host) for host in expected or []]
    fleet = None if checks is None else acceptance.fleet_report(dict(checks), expected)
    summary = acceptance.site_summary_markdown(nodes, list(stages_all), list(stages_enabled), dict(skip_reasons or {}),
                                               fleet, bool(check_mode), expected)
    files = {
        "site-summary.md": summary,
        "site-summary.json": json.dumps(nodes, indent=4, sort_keys=True) + "\n",
    }
    lines = []
    if fleet is not None:
        fleet_md = acceptance.fleet_markdown(fleet)
        files["fleet.json"] = json.dumps(fleet, indent=4, sort_keys=True) + "\n"
        files["fleet.md"] = fleet_md
        lines = fleet_md.splitlines() + ["", "Reports: %s" % (report_dir,), ""]
    return {"files": files, "lines": lines + summary.splitlines(), "fleet": fleet}
