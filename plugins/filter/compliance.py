# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: compliance_node_report.yml, compliance_fleet_report.yml,
# compliance_markdown.yml, compliance_volume_probes.yml, compliance_evidence_file_name.yml and
# compliance_scap_content.yml beside this file.


from ansible.errors import AnsibleFilterError
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_report import (
    ComplianceError,
    evidence_file_name,
    fleet_markdown,
    fleet_report,
    node_markdown,
    node_report,
    volume_probes,
)
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_scap import ScapContentError, scap_content
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.plain_data import plain


def compliance_node_report(evidence, control_map, host, context=None, collected_at=""):
    if not isinstance(evidence, dict):
        raise AnsibleFilterError("compliance_node_report: evidence must be a mapping of probe name to result")
    try:
        return node_report(str(host), plain(evidence), plain(control_map), plain(context or {}), str(collected_at))
    except ComplianceError as exc:
        raise AnsibleFilterError("compliance_node_report: %s" % exc) from exc


def compliance_fleet_report(reports, generated_at=""):
    if not isinstance(reports, (list, tuple)):
        raise AnsibleFilterError("compliance_fleet_report: a list of node reports is required")
    return fleet_report(plain(reports), str(generated_at))


def compliance_markdown(report):
    if not isinstance(report, dict):
        raise AnsibleFilterError("compliance_markdown: a node or fleet report is required")
    report = plain(report)
    return node_markdown(report) if "host" in report else fleet_markdown(report)


def compliance_volume_probes(volumes):
    try:
        return volume_probes(plain(volumes))
    except ComplianceError as exc:
        raise AnsibleFilterError("compliance_volume_probes: %s" % exc) from exc


def compliance_evidence_file_name(name):
    try:
        return evidence_file_name(plain(name))
    except ComplianceError as exc:
        raise AnsibleFilterError("compliance_evidence_file_name: %s" % exc) from exc


def compliance_scap_content(facts, profile=None, tailoring=None, overrides=None):
    if not isinstance(facts, dict):
        raise AnsibleFilterError("compliance_scap_content: the node's ansible_facts are required")
    facts = plain(facts)
    try:
        return scap_content(str(facts.get("distribution", "")), str(facts.get("distribution_major_version", "")),
                            plain(profile), plain(tailoring), plain(overrides))
    except ScapContentError as exc:
        raise AnsibleFilterError("compliance_scap_content: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {
            "compliance_node_report": compliance_node_report,
            "compliance_fleet_report": compliance_fleet_report,
            "compliance_markdown": compliance_markdown,
            "compliance_volume_probes": compliance_volume_probes,
            "compliance_evidence_file_name": compliance_evidence_file_name,
            "compliance_scap_content": compliance_scap_content,
        }
