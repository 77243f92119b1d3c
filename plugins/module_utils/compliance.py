# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compliance evidence, the node side: run the read-only probes of playbooks/compliance.yml
once each and record what they returned (the compliance_evidence module). Parsing and judging
that evidence happens on the controller, in plugins/plugin_utils/compliance_report.py.

Pure functions, no Ansible: the module injects the runner and the clock.
"""


class ComplianceError(Exception):
    """A probe list that cannot be run (a probe without a name or argv, a name used twice)."""


def collect(probes, run, now):
    """Run every read-only probe once: {name: {command, rc, stdout, stderr, start}} or, for a
    probe with a skip reason, {name: {skipped: True, reason}}. RUN(argv) returns (rc, out, err)
    and raises OSError for a missing program; NOW() gives the time stamp."""
    evidence = {}
    for probe in probes:
        name = probe.get("name")
        if not name or name in evidence:
            raise ComplianceError("every probe needs a unique name: %r" % (probe,))
        if probe.get("skip"):
            evidence[name] = {"skipped": True, "reason": probe["skip"]}
            continue
        argv = [str(a) for a in probe.get("argv") or []]
        if not argv:
            raise ComplianceError("probe %s has no argv" % name)
        start = now()
        try:
            rc, out, err = run(argv)
        except OSError as exc:
            rc, out, err = 127, "", "%s: %s" % (argv[0], exc)
        evidence[name] = {"command": " ".join(argv), "rc": rc, "stdout": out.rstrip("\n"), "stderr": err.rstrip("\n"),
                          "start": start}
    return evidence
