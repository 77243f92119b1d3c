#!/usr/bin/env python3
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The lab's frozen snapshot of Ubuntu's NVIDIA server driver packages.

Ubuntu's -updates and -security pockets list only the newest build of a driver branch, so a
lab that installs an exact build from the archive breaks the day Ubuntu publishes the next
one. Worse, a mirror can list one build and serve another: on 2026-12-07 this testbed's
mirror listed only 580.196.07 while its pool served 580.178.04 and returned 404 for
580.196.07, so apt could install neither. Fleets pin a snapshot of the archive for this
reason (an internal mirror, aptly, Landscape, snapshot.ubuntu.com); the lab does the same.

``scripts/ubuntu-nvidia-snapshot.lock`` names every .deb of the snapshot by suite, pool path,
size and SHA-256. ``build`` fetches them from the archive's pool (which keeps a superseded
build after its index has moved on), checks each against the lock, and writes a flat apt
repository that scripts/build-images.sh puts into the Ubuntu images. Its integrity is the
lock's SHA-256 (the files are checked before the index is written), so the images' sources
entry marks it trusted rather than signing it with a key made for the occasion.

Usage:
  ubuntu_snapshot.py build SUITE OUTDIR
      the flat repository of SUITE's lock lines in OUTDIR (Packages, Packages.gz, Release)
  ubuntu_snapshot.py lock SUITE VERSION PACKAGE...
      print lock lines for PACKAGE at VERSION (e.g. 580.178.04-0ubuntu0.24.04.1): the pool
      path is the one the archive's index gives the package at its listed build, with the
      version replaced; each file is downloaded (into the cache) to take its size and SHA-256. PACKAGE names
      a versioned name as it is at VERSION (nvidia-firmware-580-server-580.178.04).

Environment: GPUCLOUD_UBUNTU_MIRROR (default http://archive.ubuntu.com/ubuntu),
GPUCLOUD_CACHE (downloads are kept under $GPUCLOUD_CACHE/ubuntu-snapshot/).
"""

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK = os.path.join(HERE, "ubuntu-nvidia-snapshot.lock")
ORIGIN = "gpucloud-lab-snapshot"
COMPONENTS = ("restricted", "multiverse")
POCKETS = ("updates", "security")


class SnapshotError(Exception):
    pass


def parse_lock(text):
    """Lock lines ``SUITE POOL_PATH SIZE SHA256``; '#' starts a comment."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 4:
            raise SnapshotError("lock line %d: want 'SUITE POOL_PATH SIZE SHA256', got %r" % (number, raw))
        suite, path, size, sha256 = fields
        if not path.startswith("pool/") or not path.endswith(".deb") or ".." in path.split("/"):
            raise SnapshotError("lock line %d: %r is not a .deb path in the archive's pool" % (number, path))
        if not size.isdigit():
            raise SnapshotError("lock line %d: size %r is not a number of bytes" % (number, size))
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise SnapshotError("lock line %d: %r is not a lowercase SHA-256" % (number, sha256))
        entries.append({"suite": suite, "path": path, "size": int(size), "sha256": sha256})
    return entries


def parse_packages(text):
    """Stanzas of an apt Packages index, as dicts of the fields used here."""
    stanzas = []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields and "Filename" in fields and "Version" in fields:
            stanzas.append(fields)
    return stanzas


def upstream(version):
    """The upstream part of a Debian version (no epoch, no revision)."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def pool_path(stanzas, package, version):
    """Pool path of PACKAGE at VERSION, from the index's record of it at another build.

    A versioned package name (nvidia-firmware-580-server-580.178.04) is matched to the
    index's name at its own build (nvidia-firmware-580-server-580.196.07)."""
    want = upstream(version)
    found = []
    for stanza in stanzas:
        listed = stanza["Version"]
        name = stanza["Package"]
        if name == package or (upstream(listed) in name and name.replace(upstream(listed), want) == package):
            found.append(stanza)
    if not found:
        raise SnapshotError("the index has no record of %s at any build: cannot tell its pool path" % package)
    stanza = found[-1]
    listed = stanza["Version"]
    path = stanza["Filename"].replace(listed, version).replace(upstream(listed), want)
    if path == stanza["Filename"] and listed != version:
        raise SnapshotError("the index's path %s of %s does not carry its version %s"
                            % (stanza["Filename"], package, listed))
    return path


def mirror():
    return os.environ.get("GPUCLOUD_UBUNTU_MIRROR", "http://archive.ubuntu.com/ubuntu").rstrip("/")


def cache_dir():
    root = os.environ.get("GPUCLOUD_CACHE", os.path.join(os.path.dirname(HERE), ".cache"))
    return os.path.join(root, "ubuntu-snapshot")


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url, dest):
    tmp = dest + ".part"
    try:
        with urllib.request.urlopen(url, timeout=120) as answer, open(tmp, "wb") as out:
            shutil.copyfileobj(answer, out, 1 << 20)
    except urllib.error.HTTPError as exc:
        raise SnapshotError("%s: HTTP %s" % (url, exc.code)) from exc
    except OSError as exc:
        raise SnapshotError("%s: %s" % (url, exc)) from exc
    os.replace(tmp, dest)


def fetch(entry):
    """Path of ENTRY's .deb in the cache, downloaded when missing, checked against the lock."""
    os.makedirs(cache_dir(), exist_ok=True)
    dest = os.path.join(cache_dir(), os.path.basename(entry["path"]))
    if not (os.path.exists(dest) and sha256_of(dest) == entry["sha256"]):
        download("%s/%s" % (mirror(), entry["path"]), dest)
    size, digest = os.path.getsize(dest), sha256_of(dest)
    if size != entry["size"] or digest != entry["sha256"]:
        os.unlink(dest)
        raise SnapshotError("%s/%s: %d bytes, SHA-256 %s; the lock says %d bytes, %s: refusing it"
                            % (mirror(), entry["path"], size, digest, entry["size"], entry["sha256"]))
    return dest


def build(suite, outdir):
    with open(LOCK, encoding="utf-8") as handle:
        entries = [e for e in parse_lock(handle.read()) if e["suite"] == suite]
    if not entries:
        raise SnapshotError("%s has no lines for suite %s" % (LOCK, suite))
    os.makedirs(outdir, exist_ok=True)
    for entry in entries:
        src = fetch(entry)
        dest = os.path.join(outdir, os.path.basename(src))
        if not os.path.exists(dest):
            shutil.copy2(src, dest)
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=outdir, check=True,
                              capture_output=True, text=True).stdout
    with open(os.path.join(outdir, "Packages"), "w", encoding="utf-8") as out:
        out.write(packages)
    with gzip.open(os.path.join(outdir, "Packages.gz"), "wt", encoding="utf-8") as out:
        out.write(packages)
    release = subprocess.run(
        ["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=" + ORIGIN,
         "-o", "APT::FTPArchive::Release::Label=" + ORIGIN,
         "-o", "APT::FTPArchive::Release::Suite=" + suite, "release", "."],
        cwd=outdir, check=True, capture_output=True, text=True).stdout
    with open(os.path.join(outdir, "Release"), "w", encoding="utf-8") as out:
        out.write(release)
    return len(entries)


def lock(suite, version, packages):
    stanzas = []
    for pocket in POCKETS:
        for component in COMPONENTS:
            url = "%s/dists/%s-%s/%s/binary-amd64/Packages.gz" % (mirror(), suite, pocket, component)
            try:
                with urllib.request.urlopen(url, timeout=120) as answer:
                    stanzas += parse_packages(gzip.decompress(answer.read()).decode("utf-8"))
            except (urllib.error.URLError, OSError) as exc:
                raise SnapshotError("%s: %s" % (url, exc)) from exc
    lines = []
    os.makedirs(cache_dir(), exist_ok=True)
    for package in packages:
        path = pool_path(stanzas, package, version)
        # kept in the cache: build() checks it against the lock line written from it
        dest = os.path.join(cache_dir(), os.path.basename(path))
        download("%s/%s" % (mirror(), path), dest)
        lines.append("%s %s %d %s" % (suite, path, os.path.getsize(dest), sha256_of(dest)))
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) == 3 and argv[0] == "build":
            count = build(argv[1], argv[2])
            print("ubuntu_snapshot: %s: %d packages checked against the lock, repository in %s"
                  % (argv[1], count, argv[2]))
            return 0
        if len(argv) >= 4 and argv[0] == "lock":
            print("\n".join(lock(argv[1], argv[2], argv[3:])))
            return 0
    except SnapshotError as exc:
        print("ubuntu_snapshot: %s" % exc, file=sys.stderr)
        return 1
    print(__doc__.split("Usage:", 1)[1].split("Environment:", 1)[0], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
