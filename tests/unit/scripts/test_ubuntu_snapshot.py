# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""scripts/ubuntu_snapshot.py: the lab's frozen snapshot of Ubuntu's NVIDIA server driver."""

import hashlib
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import ubuntu_snapshot as snap  # noqa: E402  pylint: disable=wrong-import-position

INDEX = os.path.join(ROOT, "tests", "fixtures", "ubuntu_archive",
                     "noble-updates-restricted-Packages-nvidia-580-server.txt")
POOL = "pool/restricted/n/nvidia-graphics-drivers-580-server/"


def stanzas():
    with open(INDEX, encoding="utf-8") as handle:
        return snap.parse_packages(handle.read())


def test_the_index_lists_a_build_the_lock_must_replace():
    utils = [s["Version"] for s in stanzas() if s["Package"] == "nvidia-utils-580-server"]
    assert utils == ["580.196.07-0ubuntu0.24.04.1"]


def test_pool_path_of_a_build_the_index_no_longer_lists():
    assert snap.pool_path(stanzas(), "nvidia-utils-580-server", "580.178.04-0ubuntu0.24.04.1") == (
        POOL + "nvidia-utils-580-server_580.178.04-0ubuntu0.24.04.1_amd64.deb")


def test_pool_path_of_a_versioned_name_from_its_record_at_another_build():
    others = [s for s in stanzas() if s["Package"] != "nvidia-firmware-580-server-580.178.04"]
    assert snap.pool_path(others, "nvidia-firmware-580-server-580.178.04", "580.178.04-0ubuntu0.24.04.1") == (
        POOL + "nvidia-firmware-580-server-580.178.04_580.178.04-0ubuntu0.24.04.1_amd64.deb")
    # listed itself: the index's own path
    listed = [s for s in stanzas() if s["Package"] == "nvidia-firmware-580-server-580.178.04"]
    assert snap.pool_path(stanzas(), "nvidia-firmware-580-server-580.178.04",
                          "580.178.04-0ubuntu0.24.04.1") == listed[0]["Filename"]


def test_pool_path_refuses_a_package_the_index_never_heard_of():
    with pytest.raises(snap.SnapshotError, match="no record of nvidia-utils-575-server"):
        snap.pool_path(stanzas(), "nvidia-utils-575-server", "575.57.08-0ubuntu0.24.04.1")


@pytest.mark.parametrize("line, message", [
    ("noble pool/x.deb 12", "want 'SUITE POOL_PATH SIZE SHA256'"),
    ("noble dists/x.deb 12 " + "a" * 64, "not a .deb path in the archive's pool"),
    ("noble pool/../etc/x.deb 12 " + "a" * 64, "not a .deb path in the archive's pool"),
    ("noble pool/x.deb twelve " + "a" * 64, "size 'twelve' is not a number"),
    ("noble pool/x.deb 12 " + "A" * 64, "is not a lowercase SHA-256"),
])
def test_parse_lock_names_the_bad_line(line, message):
    with pytest.raises(snap.SnapshotError, match="lock line 2: .*" + re.escape(message)):
        snap.parse_lock("# comment\n" + line + "\n")


def test_the_lock_holds_every_exact_build_the_lab_pins():
    with open(snap.LOCK, encoding="utf-8") as handle:
        entries = snap.parse_lock(handle.read())
    paths = [e["path"] for e in entries]
    assert len(paths) == len(set(paths))
    with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "lab_gpu.yml"), encoding="utf-8") as handle:
        pinned = re.search(r"\{\{ '([0-9.]+)' if ansible_facts.distribution \| default\(''\) == 'Ubuntu'",
                           handle.read()).group(1)
    for suite, release in (("noble", "24.04"), ("jammy", "22.04")):
        names = {os.path.basename(e["path"]).split("_")[0] for e in entries
                 if e["suite"] == suite and "_%s-0ubuntu0.%s." % (pinned, release) in e["path"]}
        # what apt installs for the role's Ubuntu driver (both flavours, Fabric Manager, NSCQ)
        assert {"nvidia-utils-580-server", "libnvidia-compute-580-server", "nvidia-compute-utils-580-server",
                "nvidia-headless-no-dkms-580-server", "nvidia-headless-no-dkms-580-server-open",
                "nvidia-kernel-source-580-server", "nvidia-kernel-source-580-server-open",
                "nvidia-kernel-common-580-server", "libnvidia-cfg1-580-server",
                "nvidia-firmware-580-server-" + pinned, "nvidia-fabricmanager-580", "libnvidia-nscq-580"} <= names, suite


def make_deb(where, name, version, description="test package"):
    root = os.path.join(where, name)
    os.makedirs(os.path.join(root, "DEBIAN"))
    with open(os.path.join(root, "DEBIAN", "control"), "w", encoding="utf-8") as handle:
        handle.write("Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: lab <lab@gpucloud.invalid>\n"
                     "Description: %s\n" % (name, version, description))
    deb = os.path.join(where, "%s_%s_amd64.deb" % (name, version))
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", root, deb], check=True, capture_output=True)
    with open(deb, "rb") as handle:
        data = handle.read()
    return deb, len(data), hashlib.sha256(data).hexdigest()


@pytest.mark.skipif(not (shutil.which("dpkg-deb") and shutil.which("apt-ftparchive")),
                    reason="needs dpkg-deb and apt-ftparchive (apt-utils; scripts/setup.sh installs it)")
def test_build_checks_every_file_against_the_lock_before_indexing(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "pool" / "t").mkdir(parents=True)
    deb, size, digest = make_deb(str(tmp_path), "nvidia-utils-580-server", "580.178.04-0ubuntu0.24.04.1")
    shutil.move(deb, mirror / "pool" / "t")
    path = "pool/t/" + os.path.basename(deb)
    lock = tmp_path / "lock"
    lock.write_text("noble %s %d %s\n" % (path, size, digest))
    monkeypatch.setattr(snap, "LOCK", str(lock))
    monkeypatch.setenv("GPUCLOUD_UBUNTU_MIRROR", "file://" + str(mirror))
    monkeypatch.setenv("GPUCLOUD_CACHE", str(tmp_path / "cache"))

    out = tmp_path / "repo"
    assert snap.build("noble", str(out)) == 1
    packages = (out / "Packages").read_text()
    assert snap.parse_packages(packages)[0]["Version"] == "580.178.04-0ubuntu0.24.04.1"
    assert "SHA256: " + digest in packages
    release = (out / "Release").read_text()
    assert "Origin: gpucloud-lab-snapshot" in release and "Suite: noble" in release
    with pytest.raises(snap.SnapshotError, match="has no lines for suite jammy"):
        snap.build("jammy", str(tmp_path / "jammy"))

    # the pool serves other bytes under the locked name: refused, nothing kept, no index
    shutil.rmtree(tmp_path / "cache")
    other = make_deb(str(tmp_path / "o"), "nvidia-utils-580-server", "580.178.04-0ubuntu0.24.04.1",
                     "other bytes under the same name")[0]
    shutil.move(other, mirror / path)
    with pytest.raises(snap.SnapshotError, match="the lock says %d bytes, %s: refusing it" % (size, digest)):
        snap.build("noble", str(tmp_path / "repo2"))
    assert not (tmp_path / "repo2" / "Packages").exists()
    assert os.listdir(tmp_path / "cache" / "ubuntu-snapshot") == []

    # the pool does not serve it at all
    os.unlink(mirror / path)
    with pytest.raises(snap.SnapshotError, match="No such file|HTTP 404|not found"):
        snap.build("noble", str(tmp_path / "repo3"))
