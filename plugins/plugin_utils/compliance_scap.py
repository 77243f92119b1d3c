# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which ComplianceAsCode (SSG) content playbooks/compliance.yml scans a node with: the Debian
package that carries the data stream, the data stream, the profile and the tailoring file,
chosen by the node's OS. Controller-only, pure, unit-tested."""


import re


class ScapContentError(Exception):
    """An inventory value that names no content; the message names the variable."""


PROFILE_PREFIX = "xccdf_org.ssgproject.content_profile_"
DEBIAN_POOL = "http://deb.debian.org/debian/pool/main/s/scap-security-guide/"

# Debian 13's scap-security-guide 0.1.76-1 (the sha256 of each .deb as the archive serves it,
# measured 2026-12-03). ssg-debian carries ssg-debian12-ds.xml (Debian 12's 0.1.65 has none);
# ssg-debderived carries ssg-ubuntu2204-ds.xml and ssg-ubuntu2404-ds.xml (Ubuntu 24.04's own
# ssg-debderived is 0.1.71, without a 24.04 data stream; Ubuntu 22.04 has no ssg package).
PACKAGES = {
    "ssg-debian": {
        "url": DEBIAN_POOL + "ssg-debian_0.1.76-1_all.deb",
        "sha256": "f6880719015c16e8e221bc2503c0e5a9f83d6a09fc6f9292d3522e46bf4fc9d7",
        "url_variable": "compliance_ssg_deb_url",
        "sha256_variable": "compliance_ssg_deb_sha256",
    },
    "ssg-debderived": {
        "url": DEBIAN_POOL + "ssg-debderived_0.1.76-1_all.deb",
        "sha256": "dd41637d94ac0f9f3cb5cbb41a6ce17d8f0739673291bdb1763c3f16bc8dbee7",
        "url_variable": "compliance_ssg_debderived_deb_url",
        "sha256_variable": "compliance_ssg_debderived_deb_sha256",
    },
}

# Per "<distribution>_<major>": the data stream, the profiles it carries (read from the 0.1.76
# files), the default profile, and the gpucloud tailoring of that default (a file under
# playbooks/files/compliance/ and the id of the profile it defines).
CONTENT = {
    "Debian_12": {
        "package": "ssg-debian",
        "datastream": "ssg-debian12-ds.xml",
        "profiles": ("anssi_bp28_enhanced", "anssi_bp28_high", "anssi_bp28_intermediary", "anssi_bp28_minimal",
                     "anssi_np_nt28_average", "anssi_np_nt28_high", "anssi_np_nt28_minimal",
                     "anssi_np_nt28_restrictive", "standard"),
        "default_profile": "anssi_bp28_intermediary",
        "tailoring": "ssg-debian12-gpucloud-tailoring.xml",
        "tailored_profile": "xccdf_gpucloud.fleet_profile_anssi_bp28_intermediary_no_fs_walk",
    },
    "Ubuntu_22": {
        "package": "ssg-debderived",
        "datastream": "ssg-ubuntu2204-ds.xml",
        "profiles": ("cis_level1_server", "cis_level1_workstation", "cis_level2_server", "cis_level2_workstation",
                     "standard", "stig"),
        "default_profile": "cis_level1_server",
        "tailoring": "ssg-ubuntu2204-gpucloud-tailoring.xml",
        "tailored_profile": "xccdf_gpucloud.fleet_profile_cis_level1_server_gpu_node",
    },
    "Ubuntu_24": {
        "package": "ssg-debderived",
        "datastream": "ssg-ubuntu2404-ds.xml",
        "profiles": ("cis_level1_server", "cis_level1_workstation", "cis_level2_server", "cis_level2_workstation"),
        "default_profile": "cis_level1_server",
        "tailoring": "ssg-ubuntu2404-gpucloud-tailoring.xml",
        "tailored_profile": "xccdf_gpucloud.fleet_profile_cis_level1_server_gpu_node",
    },
}

_XCCDF_ID = re.compile(r"xccdf_[A-Za-z0-9.-]+_profile_[A-Za-z0-9_.-]+\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def _short(profile):
    return profile[len(PROFILE_PREFIX):] if profile.startswith(PROFILE_PREFIX) else profile


def _package(name, overrides):
    """The package's URL and sha256, with the inventory's overrides (None or "" keep the pin)."""
    pkg = PACKAGES[name]
    given = (overrides or {}).get(name) or {}
    url = given.get("url") or pkg["url"]
    sha256 = given.get("sha256") or pkg["sha256"]
    if not isinstance(url, str) or not re.match(r"(https?|file)://\S+\.deb\Z", url):
        raise ScapContentError("%s: an http(s):// or file:// URL of a .deb is required, got %r" % (pkg["url_variable"], url))
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise ScapContentError("%s: 64 lower-case hex digits are required, got %r" % (pkg["sha256_variable"], sha256))
    deb = url.rsplit("/", 1)[1]
    return {"name": name, "url": url, "sha256": sha256, "deb": deb, "unpacked": deb[:-len(".deb")]}


def scap_content(distribution, major_version, profile=None, tailoring=None, overrides=None):
    """What to scan DISTRIBUTION MAJOR_VERSION with.

    PROFILE (compliance_scap_profile): None/"" for the default profile with the gpucloud
    tailoring; otherwise one of the data stream's profiles (short name or full XCCDF id), run
    untailored, or, with TAILORING (compliance_scap_tailoring, a path on the controller), the
    id of a profile that tailoring file defines. OVERRIDES: {package: {url, sha256}}.

    Returns {scan: False, reason} when no data stream covers the OS, else {scan: True, package,
    datastream, profile, tailoring (a file name under playbooks/files/compliance, a path, or ""),
    description}. Raises ScapContentError naming the variable for a value that names nothing."""
    key = "%s_%s" % (distribution, major_version)
    profile = "" if profile is None else profile
    tailoring = "" if tailoring is None else tailoring
    if not isinstance(profile, str) or profile != profile.strip():
        raise ScapContentError("compliance_scap_profile: a profile name is required, got %r" % (profile,))
    if not isinstance(tailoring, str) or (tailoring and not tailoring.startswith("/")):
        raise ScapContentError("compliance_scap_tailoring: an absolute path of a tailoring file on the controller is "
                               "required, got %r" % (tailoring,))
    content = CONTENT.get(key)
    if content is None:
        known = ", ".join(k.replace("_", " ") for k in sorted(CONTENT))
        return {"scan": False, "reason": "no ComplianceAsCode data stream for %s %s in scap-security-guide 0.1.76 "
                "(data streams for: %s)" % (distribution, major_version, known)}
    out = {"scan": True, "package": _package(content["package"], overrides), "datastream": content["datastream"]}
    if tailoring:
        if not _XCCDF_ID.match(profile):
            raise ScapContentError("compliance_scap_profile: with compliance_scap_tailoring, the full id of a profile the "
                                   "tailoring file defines is required (xccdf_..._profile_...), got %r" % (profile,))
        out.update(profile=profile, tailoring=tailoring,
                   description="profile %s of your tailoring file %s" % (profile, tailoring))
        return out
    if not profile:
        out.update(profile=content["tailored_profile"], tailoring=content["tailoring"],
                   description="%s tailored for a GPU node (%s)" % (content["default_profile"], content["tailoring"]))
        return out
    if _short(profile) not in content["profiles"]:
        raise ScapContentError("compliance_scap_profile: %r is not a profile of %s (%s %s); choose one of %s"
                               % (profile, content["datastream"], distribution, major_version,
                                  ", ".join(content["profiles"])))
    out.update(profile=PROFILE_PREFIX + _short(profile), tailoring="",
               description="%s, untailored" % _short(profile))
    return out
