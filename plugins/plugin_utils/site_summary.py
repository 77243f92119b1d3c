# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A node's one-line rollout verdict for site.yml's summary and its stop-on-failure task.

A failed stage wins; a node that verify never judged is "not verified"; checks that all
pass but some wait for a reboot say so (the GPU checks run after it); otherwise the node is
accepted or the failed checks are named. The rows are node_acceptance's ``verify_checks``
(plugin_utils/acceptance.py's checks: {check, ok, status, ...}). Pure: no Ansible objects.
"""

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
