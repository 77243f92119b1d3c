# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The OpenSCAP content playbooks/compliance.yml chooses per OS, from the captured facts of
each OS (tests/fixtures/facts/*.source), and the tailoring files it names."""


import json
import os
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpucloud.fleet.plugins.filter.compliance import compliance_scap_content
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_scap import (
    CONTENT,
    PROFILE_PREFIX,
    ScapContentError,
    scap_content,
)

HERE = os.path.dirname(__file__)
FACTS = os.path.join(HERE, "..", "..", "..", "fixtures", "facts")
FILES = os.path.join(HERE, "..", "..", "..", "..", "playbooks", "files", "compliance")
XCCDF = "{http://checklists.nist.gov/xccdf/1.2}"


def facts(name):
    with open(os.path.join(FACTS, name + ".json")) as handle:
        return json.load(handle)


@pytest.mark.parametrize("os_name, package, datastream, tailoring", [
    ("ubuntu2404", "ssg-debderived", "ssg-ubuntu2404-ds.xml", "ssg-ubuntu2404-gpucloud-tailoring.xml"),
    ("ubuntu2204", "ssg-debderived", "ssg-ubuntu2204-ds.xml", "ssg-ubuntu2204-gpucloud-tailoring.xml"),
    ("debian12", "ssg-debian", "ssg-debian12-ds.xml", "ssg-debian12-gpucloud-tailoring.xml"),
])
def test_each_os_gets_its_own_data_stream_and_tailoring(os_name, package, datastream, tailoring):
    content = compliance_scap_content(facts(os_name))
    assert content["scan"] is True
    assert content["package"]["name"] == package
    assert content["package"]["deb"] == package + "_0.1.76-1_all.deb"
    assert content["package"]["unpacked"] == package + "_0.1.76-1_all"
    assert content["datastream"] == datastream
    assert content["tailoring"] == tailoring


def test_ubuntu_defaults_to_cis_level1_server_tailored_for_a_gpu_node():
    for os_name in ("ubuntu2204", "ubuntu2404"):
        content = compliance_scap_content(facts(os_name))
        assert content["profile"] == "xccdf_gpucloud.fleet_profile_cis_level1_server_gpu_node"
        assert content["description"].startswith("cis_level1_server tailored")


def test_the_debderived_package_is_pinned_by_sha256():
    content = scap_content("Ubuntu", "24")
    assert content["package"]["url"] == (
        "http://deb.debian.org/debian/pool/main/s/scap-security-guide/ssg-debderived_0.1.76-1_all.deb")
    assert content["package"]["sha256"] == "dd41637d94ac0f9f3cb5cbb41a6ce17d8f0739673291bdb1763c3f16bc8dbee7"


@pytest.mark.parametrize("os_name", ["debian13", "rocky9", "rhel9"])
def test_an_os_without_a_data_stream_is_not_scanned_and_says_why(os_name):
    content = compliance_scap_content(facts(os_name))
    assert content["scan"] is False
    assert "no ComplianceAsCode data stream for %s %s" % (
        facts(os_name)["distribution"], facts(os_name)["distribution_major_version"]) in content["reason"]


@pytest.mark.parametrize("profile", ["cis_level2_server", PROFILE_PREFIX + "cis_level2_server"])
def test_a_profile_of_the_data_stream_runs_untailored(profile):
    content = scap_content("Ubuntu", "24", profile)
    assert content["profile"] == PROFILE_PREFIX + "cis_level2_server"
    assert content["tailoring"] == ""


def test_the_profiles_differ_by_release():
    assert scap_content("Ubuntu", "22", "stig")["profile"] == PROFILE_PREFIX + "stig"
    with pytest.raises(ScapContentError, match=r"compliance_scap_profile: 'stig' is not a profile of ssg-ubuntu2404-ds.xml"
                       r" \(Ubuntu 24\); choose one of cis_level1_server, cis_level1_workstation"):
        scap_content("Ubuntu", "24", "stig")


@pytest.mark.parametrize("profile", ["anssi_bp28_intermediary", "cis_level1_server ", "CIS_LEVEL1_SERVER",
                                     PROFILE_PREFIX + "cis_level3_server", 3])
def test_a_profile_the_data_stream_lacks_is_refused_naming_the_variable(profile):
    with pytest.raises(AnsibleFilterError, match="compliance_scap_content: compliance_scap_profile: "):
        compliance_scap_content(facts("ubuntu2404"), profile)


def test_an_own_tailoring_needs_the_full_id_of_its_profile():
    content = scap_content("Ubuntu", "22", "xccdf_example.org_profile_ours", "/etc/gpucloud/ours.xml")
    assert (content["profile"], content["tailoring"]) == ("xccdf_example.org_profile_ours", "/etc/gpucloud/ours.xml")
    with pytest.raises(ScapContentError, match="compliance_scap_profile: with compliance_scap_tailoring"):
        scap_content("Ubuntu", "22", "", "/etc/gpucloud/ours.xml")
    with pytest.raises(ScapContentError, match="compliance_scap_tailoring: an absolute path"):
        scap_content("Ubuntu", "22", "xccdf_example.org_profile_ours", "ours.xml")


def test_a_mirror_replaces_the_url_and_a_bad_checksum_is_refused_naming_the_variable():
    mirror = {"ssg-debderived": {"url": "http://mirror.example/debian/ssg-debderived_0.1.76-1_all.deb", "sha256": None}}
    content = scap_content("Ubuntu", "24", overrides=mirror)
    assert content["package"]["url"] == mirror["ssg-debderived"]["url"]
    assert content["package"]["sha256"] == "dd41637d94ac0f9f3cb5cbb41a6ce17d8f0739673291bdb1763c3f16bc8dbee7"
    with pytest.raises(ScapContentError, match="compliance_ssg_debderived_deb_sha256: 64 lower-case hex"):
        scap_content("Ubuntu", "24", overrides={"ssg-debderived": {"sha256": "DD41"}})
    with pytest.raises(ScapContentError, match="compliance_ssg_deb_url: an http"):
        scap_content("Debian", "12", overrides={"ssg-debian": {"url": "deb.debian.org/ssg-debian.deb"}})


@pytest.mark.parametrize("key", sorted(CONTENT))
def test_each_tailoring_file_defines_the_profile_the_table_runs(key):
    content = CONTENT[key]
    root = ET.parse(os.path.join(FILES, content["tailoring"])).getroot()
    assert root.find(XCCDF + "benchmark").get("href") == content["datastream"]
    profiles = root.findall(XCCDF + "Profile")
    assert [p.get("id") for p in profiles] == [content["tailored_profile"]]
    assert profiles[0].get("extends") == PROFILE_PREFIX + content["default_profile"]
    assert content["default_profile"] in content["profiles"]
    # a tailoring only leaves rules out
    assert {s.get("selected") for s in profiles[0].findall(XCCDF + "select")} == {"false"}
