# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.disk_encryption import FilterModule, disk_encryption_plan
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.disk_encryption import DiskEncryptionPlanError, plan

OS_PACKAGES = ["cryptsetup-bin", "clevis", "clevis-luks", "clevis-systemd", "util-linux", "e2fsprogs"]
GOOD = dict(
    volumes=[{"name": "checkpoints", "device": "/dev/loop0", "filesystem": "xfs", "mount_point": "/data/checkpoints",
              "mount_options": ["defaults", "noatime"]}],
    tang_servers=["http://tang1:8080/", "https://tang2"],
    tang_threshold=2,
    recovery_passphrase="correct horse",
    recovery_keyslot=0,
    clevis_keyslot=1,
    pbkdf={},
    md_devices=[],
    md_name="checkpoints",
    md_level=0,
    os_packages=OS_PACKAGES,
)


def _plan(**changes):
    args = dict(GOOD, **changes)
    return plan(**args)


def _error(**changes):
    with pytest.raises(DiskEncryptionPlanError) as info:
        _plan(**changes)
    return str(info.value)


def test_the_lab_volume_is_planned_with_its_defaults_filled_in():
    result = _plan()
    assert result["packages"] == OS_PACKAGES + ["xfsprogs"]
    assert result["tang_urls"] == ["http://tang1:8080", "https://tang2"]
    assert result["volumes"] == [{
        "device": "/dev/loop0", "name": "checkpoints", "filesystem": "xfs", "mount_point": "/data/checkpoints",
        "mount_options": ["defaults", "noatime", "_netdev", "nofail"]}]


def test_a_bare_volume_gets_xfs_no_mount_and_the_default_options_once():
    result = _plan(volumes=[{"name": "a", "device": "/dev/nvme1n1"},
                            {"name": "b", "device": "/dev/nvme2n1", "filesystem": "ext4",
                             "mount_point": "/b", "mount_options": ["nofail", "defaults", "nofail"]}])
    assert result["volumes"][0] == {"device": "/dev/nvme1n1", "name": "a", "filesystem": "xfs", "mount_point": "",
                                    "mount_options": ["defaults", "_netdev", "nofail"]}
    assert result["volumes"][1]["mount_options"] == ["nofail", "defaults", "_netdev"]
    assert result["packages"][-1] == "xfsprogs"


def test_packages_follow_the_filesystems_and_the_array():
    ext4 = [{"name": "a", "device": "/dev/md/checkpoints", "filesystem": "ext4"}]
    result = _plan(volumes=ext4, md_devices=["/dev/nvme2n1", "/dev/nvme3n1"])
    assert result["packages"] == OS_PACKAGES + ["mdadm"]
    assert _plan(volumes=ext4)["packages"] == OS_PACKAGES


def test_without_volumes_the_tang_and_passphrase_settings_are_not_needed():
    result = _plan(volumes=[], tang_servers=[], recovery_passphrase="", tang_threshold=1)
    assert result == {"packages": OS_PACKAGES, "tang_urls": [], "volumes": []}


@pytest.mark.parametrize("changes, variable", [
    (dict(tang_threshold=3), "disk_encryption_tang_threshold (3) must be between 1 and the number of "
                             "disk_encryption_tang_servers (2)"),
    (dict(tang_threshold=0), "disk_encryption_tang_threshold (0)"),
    (dict(tang_threshold="two"), "disk_encryption_tang_threshold must be an integer"),
    (dict(tang_servers=[], tang_threshold=1), "disk_encryption_tang_servers is empty"),
    (dict(tang_servers=["http://a", "http://a"]), "disk_encryption_tang_servers must be distinct"),
    (dict(tang_servers=["http://a/adv", "http://b"]), "disk_encryption_tang_servers must be http(s)://host[:port]"),
    (dict(tang_servers=["tang1", "http://b"]), "disk_encryption_tang_servers must be http(s)://host[:port]"),
    (dict(tang_servers=["http://a\n", "http://b"]), "disk_encryption_tang_servers must be http(s)://host[:port]"),
    (dict(recovery_passphrase="short"), "disk_encryption_recovery_passphrase must be set"),
    (dict(recovery_passphrase=""), "disk_encryption_recovery_passphrase must be set"),
    (dict(recovery_keyslot=32), "disk_encryption_recovery_keyslot (32) must be a LUKS2 keyslot 0-31"),
    (dict(clevis_keyslot=-1), "disk_encryption_clevis_keyslot (-1) must be a LUKS2 keyslot 0-31"),
    (dict(clevis_keyslot="0"), "disk_encryption_recovery_keyslot and disk_encryption_clevis_keyslot must differ"),
    (dict(pbkdf={"algorithm": "scrypt"}), "disk_encryption_pbkdf.algorithm (scrypt)"),
    (dict(pbkdf={"iterations": 4}), "disk_encryption_pbkdf takes only"),
    (dict(pbkdf={"iteration_time": 100, "iteration_count": 4}), "iteration_time or iteration_count, not both"),
    (dict(volumes=[{"name": "a", "device": "/dev/x"}, {"name": "a", "device": "/dev/y"}]),
     "disk_encryption_volumes: names must be distinct"),
    (dict(volumes=[{"name": "a", "device": "/dev/x"}, {"name": "b", "device": "/dev/x"}]),
     "disk_encryption_volumes: devices must be distinct"),
    (dict(volumes=[{"name": "-a", "device": "/dev/x"}]), "disk_encryption_volumes: names must be dm names"),
    (dict(volumes=[{"name": "a b", "device": "/dev/x"}]), "disk_encryption_volumes: names must be dm names"),
    (dict(volumes=[{"name": "a", "device": "sdb"}]), "disk_encryption_volumes: devices must be /dev paths"),
    (dict(volumes=[{"name": "a", "device": "/dev/x", "mount_point": "data"}]),
     "disk_encryption_volumes: mount points must be absolute"),
    (dict(volumes=[{"name": "a", "device": "/dev/x", "mount_point": "/my data"}]),
     "disk_encryption_volumes: mount points must be absolute"),
    (dict(volumes=[{"name": "a", "device": "/dev/x", "mount_point": "/d"},
                   {"name": "b", "device": "/dev/y", "mount_point": "/d"}]),
     "disk_encryption_volumes: mount points must be distinct"),
    (dict(volumes=[{"name": "a"}]), "disk_encryption_volumes[0] needs device"),
    (dict(volumes=[{"name": "a", "device": "/dev/x", "mount_options": "defaults"}]),
     "disk_encryption_volumes[0].mount_options must be a list"),
    (dict(md_devices=["/dev/a"]), "disk_encryption_md_devices needs at least 2 devices for RAID0"),
    (dict(md_devices=["/dev/a", "/dev/b", "/dev/c"], md_level=10),
     "disk_encryption_md_devices needs at least 4 devices for RAID10"),
    (dict(md_devices=["/dev/a", "/dev/a"]), "disk_encryption_md_devices must be distinct"),
    (dict(md_devices=["/dev/a", "sdb"]), "disk_encryption_md_devices must be /dev paths"),
    (dict(md_devices=["/dev/a", "/dev/b"], md_name="ck pt"), "disk_encryption_md_name (ck pt)"),
    (dict(md_devices=["/dev/a", "/dev/b"], md_name="ckpt\n"), "disk_encryption_md_name"),
    (dict(md_devices=["/dev/a", "/dev/md/checkpoints"]), "must not hold the array itself"),
])
def test_bad_input_is_refused_naming_the_variable(changes, variable):
    assert variable in _error(**changes)


def test_a_refused_threshold_does_not_echo_the_jinja_wording():
    # molecule/disk_encryption/side_effect.yml asserts the message names the variable only.
    message = _error(tang_threshold=3)
    assert "threshold 3 over 2" not in message


def test_every_problem_is_reported_at_once():
    message = _error(tang_threshold=5, recovery_passphrase="x", md_devices=["/dev/a"])
    for variable in ("disk_encryption_tang_threshold", "disk_encryption_recovery_passphrase",
                     "disk_encryption_md_devices"):
        assert variable in message


def test_the_passphrase_never_appears_in_the_plan_or_its_errors():
    secret = "s3cret-recovery"
    assert secret not in repr(_plan(recovery_passphrase=secret))
    assert secret not in _error(recovery_passphrase=secret, tang_threshold=9)


def test_the_filter_wraps_errors_and_chains_them():
    with pytest.raises(AnsibleFilterError, match="disk_encryption_plan: disk_encryption_tang_threshold") as info:
        disk_encryption_plan(GOOD["volumes"], GOOD["tang_servers"], 3, GOOD["recovery_passphrase"], 0, 1, {}, [],
                             "checkpoints", 0, OS_PACKAGES)
    assert isinstance(info.value.__cause__, DiskEncryptionPlanError)
    assert FilterModule().filters()["disk_encryption_plan"] is disk_encryption_plan
