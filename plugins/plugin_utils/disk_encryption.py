# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The disk_encryption role's input checks and derived values, in one plan.

``plan()`` refuses bad inventory before the role changes anything (every error names
the variable an operator changes) and returns what the tasks use: the package list,
the Tang URLs and each volume's device, name, filesystem, mount point and options.
"""

import re

PBKDF_KEYS = ("algorithm", "iteration_time", "iteration_count", "memory", "parallel")
PBKDF_ALGORITHMS = ("argon2i", "argon2id", "pbkdf2")

_TANG_URL = re.compile(r"https?://[^/\s]+/?")
_DM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_MOUNT_POINT = re.compile(r"/[^ ]*")
_MD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class DiskEncryptionPlanError(ValueError):
    """The role's variables contradict each other or are malformed."""


def _int(value, name, errors):
    if isinstance(value, bool):
        errors.append("%s must be an integer, got %r" % (name, value))
        return None
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        errors.append("%s must be an integer, got %r" % (name, value))
        return None


def _duplicates(values):
    seen, dups = set(), []
    for value in values:
        if value in seen and value not in dups:
            dups.append(value)
        seen.add(value)
    return dups


def _unique(values):
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _check_tang(servers, threshold, errors):
    if not servers:
        errors.append("disk_encryption_tang_servers is empty: a volume needs at least one Tang server")
    bad = [s for s in servers if not isinstance(s, str) or not _TANG_URL.fullmatch(s)]
    if bad:
        errors.append("disk_encryption_tang_servers must be http(s)://host[:port] URLs, not: %s"
                      % ", ".join(str(s) for s in bad))
    dups = _duplicates(servers)
    if dups:
        errors.append("disk_encryption_tang_servers must be distinct, listed twice: %s" % ", ".join(map(str, dups)))
    t = _int(threshold, "disk_encryption_tang_threshold", errors)
    if t is not None and not 1 <= t <= len(servers):
        errors.append("disk_encryption_tang_threshold (%s) must be between 1 and the number of "
                      "disk_encryption_tang_servers (%d)" % (threshold, len(servers)))


def _check_pbkdf(pbkdf, errors):
    if not isinstance(pbkdf, dict):
        errors.append("disk_encryption_pbkdf must be a mapping, got %r" % (pbkdf,))
        return
    unknown = sorted(str(k) for k in pbkdf if k not in PBKDF_KEYS)
    if unknown:
        errors.append("disk_encryption_pbkdf takes only %s, not %s" % (", ".join(PBKDF_KEYS), ", ".join(unknown)))
    if pbkdf.get("algorithm", "argon2id") not in PBKDF_ALGORITHMS:
        errors.append("disk_encryption_pbkdf.algorithm (%s) must be one of %s"
                      % (pbkdf.get("algorithm"), ", ".join(PBKDF_ALGORITHMS)))
    if "iteration_time" in pbkdf and "iteration_count" in pbkdf:
        errors.append("disk_encryption_pbkdf takes iteration_time or iteration_count, not both")


def _check_recovery(passphrase, recovery_keyslot, clevis_keyslot, errors):
    if not isinstance(passphrase, str) or len(passphrase) < 8:
        errors.append("disk_encryption_recovery_passphrase must be set (8 characters or more, from Ansible Vault)")
    slots = []
    for name, value in (("disk_encryption_recovery_keyslot", recovery_keyslot),
                        ("disk_encryption_clevis_keyslot", clevis_keyslot)):
        slot = _int(value, name, errors)
        if slot is not None and not 0 <= slot <= 31:
            errors.append("%s (%s) must be a LUKS2 keyslot 0-31" % (name, value))
        slots.append(slot)
    if None not in slots and slots[0] == slots[1]:
        errors.append("disk_encryption_recovery_keyslot and disk_encryption_clevis_keyslot must differ (both %s)"
                      % slots[0])


def _volumes(volumes, errors):
    """Each volume with its defaults filled in, or None when the list is malformed."""
    if not isinstance(volumes, list):
        errors.append("disk_encryption_volumes must be a list, got %r" % (volumes,))
        return []
    planned = []
    for index, volume in enumerate(volumes):
        where = "disk_encryption_volumes[%d]" % index
        if not isinstance(volume, dict):
            errors.append("%s must be a mapping with name and device, got %r" % (where, volume))
            continue
        missing = [key for key in ("name", "device") if not isinstance(volume.get(key), str)]
        if missing:
            errors.append("%s needs %s" % (where, " and ".join(missing)))
            continue
        options = volume.get("mount_options", ["defaults"])
        if not isinstance(options, list):
            errors.append("%s.mount_options must be a list, got %r" % (where, options))
            continue
        planned.append({
            "device": volume["device"],
            "name": volume["name"],
            "filesystem": volume.get("filesystem", "xfs"),
            "mount_point": volume.get("mount_point", ""),
            "mount_options": _unique(list(options) + ["_netdev", "nofail"]),
        })
    names = [v["name"] for v in planned]
    devices = [v["device"] for v in planned]
    mounts = [v["mount_point"] for v in planned if v["mount_point"]]
    bad = [n for n in names if not _DM_NAME.fullmatch(n)]
    if bad:
        errors.append("disk_encryption_volumes: names must be dm names (letters, digits, '_', '.', '-', "
                      "not first), not: %s" % ", ".join(bad))
    if _duplicates(names):
        errors.append("disk_encryption_volumes: names must be distinct, listed twice: %s"
                      % ", ".join(_duplicates(names)))
    bad = [d for d in devices if not d.startswith("/dev/")]
    if bad:
        errors.append("disk_encryption_volumes: devices must be /dev paths, not: %s" % ", ".join(bad))
    if _duplicates(devices):
        errors.append("disk_encryption_volumes: devices must be distinct, listed twice: %s"
                      % ", ".join(_duplicates(devices)))
    bad = [m for m in mounts if not isinstance(m, str) or not _MOUNT_POINT.fullmatch(m)]
    if bad:
        errors.append("disk_encryption_volumes: mount points must be absolute paths without spaces, not: %s"
                      % ", ".join(map(str, bad)))
    if _duplicates(mounts):
        errors.append("disk_encryption_volumes: mount points must be distinct, listed twice: %s"
                      % ", ".join(map(str, _duplicates(mounts))))
    return planned


def _check_md(md_devices, md_name, md_level, errors):
    level = _int(md_level, "disk_encryption_md_level", errors)
    need = 4 if level == 10 else 2
    if len(md_devices) < need:
        errors.append("disk_encryption_md_devices needs at least %d devices for RAID%s, got %d: %s"
                      % (need, md_level, len(md_devices), ", ".join(map(str, md_devices))))
    if _duplicates(md_devices):
        errors.append("disk_encryption_md_devices must be distinct, listed twice: %s"
                      % ", ".join(map(str, _duplicates(md_devices))))
    bad = [d for d in md_devices if not isinstance(d, str) or not d.startswith("/dev/")]
    if bad:
        errors.append("disk_encryption_md_devices must be /dev paths, not: %s" % ", ".join(map(str, bad)))
    if not isinstance(md_name, str) or not _MD_NAME.fullmatch(md_name):
        errors.append("disk_encryption_md_name (%s) must be letters, digits, '-' or '_' (not first)" % (md_name,))
    elif "/dev/md/" + md_name in md_devices:
        errors.append("disk_encryption_md_devices must not hold the array itself (/dev/md/%s)" % md_name)


def plan(volumes, tang_servers, tang_threshold, recovery_passphrase, recovery_keyslot, clevis_keyslot,
         pbkdf, md_devices, md_name, md_level, os_packages):
    """Check the role's variables and return what its tasks use.

    The Tang, passphrase and keyslot checks apply when there are volumes, the key
    derivation check when ``pbkdf`` is set, the array check when it has members,
    as the role's tasks need them. Raises DiskEncryptionPlanError listing every
    problem found, each naming its variable.
    """
    errors = []
    if not isinstance(tang_servers, list):
        errors.append("disk_encryption_tang_servers must be a list, got %r" % (tang_servers,))
        tang_servers = []
    if not isinstance(md_devices, list):
        errors.append("disk_encryption_md_devices must be a list, got %r" % (md_devices,))
        md_devices = []
    planned = _volumes(volumes, errors)
    if volumes:
        _check_tang(tang_servers, tang_threshold, errors)
        _check_recovery(recovery_passphrase, recovery_keyslot, clevis_keyslot, errors)
    if pbkdf:
        _check_pbkdf(pbkdf, errors)
    if md_devices:
        _check_md(md_devices, md_name, md_level, errors)
    if errors:
        raise DiskEncryptionPlanError("; ".join(errors))
    packages = list(os_packages) + (["mdadm"] if md_devices else [])
    if any(v["filesystem"] == "xfs" for v in planned):
        packages.append("xfsprogs")
    return {
        "packages": packages,
        "tang_urls": [s[:-1] if s.endswith("/") else s for s in tang_servers],
        "volumes": planned,
    }
