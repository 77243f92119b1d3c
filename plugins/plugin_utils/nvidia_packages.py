# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA package names and versions by branch, OS and package manager (pure functions).

Sources (read 2026-12-01; facts only, no code copied):
- NVIDIA/gpu-driver-container, commit 352ed15ed5a76e23a83a26bc73186b52dd9a35d6:
  ubuntu22.04/install.sh and ubuntu24.04/install.sh (fabricmanager_install, nscq_install:
  ``DRIVER_BRANCH -ge 580`` -> nvidia-fabricmanager / libnvidia-nscq, else
  nvidia-fabricmanager-<branch> / libnvidia-nscq-<branch>, installed ``=${DRIVER_VERSION}*``);
  rhel9/install.sh (same functions: nvidia-fabricmanager from 580, nvidia-fabric-manager
  before; libnvidia-nscq from 580, libnvidia-nscq-<branch> before; ``-${DRIVER_VERSION}``);
  ubuntu24.04/precompiled/nvidia-driver (linux-signatures-nvidia-<kernel> with
  linux-modules-nvidia-<branch>-server-open-<kernel>, or for the proprietary flavour
  linux-objects-nvidia-<branch>-server-<kernel> + linux-modules-nvidia-<branch>-server-<kernel>).
- NVIDIA Driver Installation Guide, Kernel Modules, Table 5
  (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/620/kernel-modules.html):
  RHEL/Rocky/Alma 8/9 ``dnf module enable nvidia-driver:580-open`` (branch) or
  ``nvidia-driver:open-dkms`` (latest); RHEL 10 dropped module streams for versionlock.
  NVIDIA/yum-packaging-dkms-nvidia README: ``XXX-dkms`` streams for the proprietary modules.
- Ubuntu's archive (noble and jammy, -updates and -security, read with ``apt-cache show`` and
  ``apt-cache madison`` in the lab's ubuntu2404 / ubuntu2204 images on 2026-12-03; captures in
  tests/fixtures/nvidia_driver/): ``nvidia-fabricmanager-<branch>`` and ``libnvidia-nscq-<branch>``
  (multiverse) at every branch, each Provides, Conflicts and Replaces the unversioned name;
  server driver ``nvidia-utils-<branch>-server``, ``libnvidia-compute-<branch>-server``,
  ``nvidia-compute-utils-<branch>-server``, ``nvidia-headless-no-dkms-<branch>-server[-open]``
  (restricted); a retired branch's packages become transitional (Installed-Size 37, one
  Depends on the next branch's package: noble's 570 -> 580, 590 -> 595).
- cuDNN installation guide (https://docs.nvidia.com/deeplearning/cudnn/installation/linux.html):
  cuDNN 9 packages per CUDA major (libcudnn9-cuda-12, libcudnn9-dev-cuda-12 on apt,
  libcudnn9-devel-cuda-12 on dnf).
"""


import re

FIRST_UNVERSIONED_FM_BRANCH = 580
APT = "apt"
DNF = "dnf"
PKG_MGRS = (APT, DNF)
FLAVOURS = ("open", "proprietary")
MODULE_SOURCES = ("dkms", "ubuntu_signed")
NO_PERSISTENCE_FLAG = "--no-persistence-mode"

# NVIDIA repository distributions released after cuDNN 8's last build (8.9.7, 2023-12):
# their repositories carry cuDNN 9 only.
NO_CUDNN8_DISTROS = ("ubuntu2404", "ubuntu2604", "debian13", "rhel10")

_BRANCH_RE = re.compile(r"^[0-9]{3}\Z")
_UPSTREAM_RE = re.compile(r"^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?\Z")
_NCCL_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+\Z")
_CUDA_RE = re.compile(r"^[0-9]{2}\.[0-9]{1,2}\Z")
_CUDNN_RE = re.compile(r"^[0-9]+(\.[0-9]+){1,3}\Z")
_KERNEL_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-[a-z0-9-]+\Z")


class NvidiaPackageError(ValueError):
    """A branch, version or OS for which no NVIDIA package exists (or bad input)."""


def branch_of(value):
    """The driver branch (int) of a branch ("580") or an upstream version ("580.95.05")."""
    text = str(value if value is not None else "").strip()
    if not (_BRANCH_RE.match(text) or _UPSTREAM_RE.match(text)):
        raise NvidiaPackageError("%r is neither a driver branch (580) nor a driver version (580.95.05)" % (value,))
    return int(text.split(".", maxsplit=1)[0])


def _pkg_mgr(value):
    if value not in PKG_MGRS:
        raise NvidiaPackageError("package manager must be one of %s, got %r" % (", ".join(PKG_MGRS), value))
    return value


ARCHIVES = ("nvidia", "ubuntu")


def fabric_manager_packages(branch, pkg_mgr, archive="nvidia"):
    """[Fabric Manager, NSCQ] package names for BRANCH (or a version of it) on apt or dnf.

    ARCHIVE is where the packages come from: ``nvidia`` (NVIDIA's CUDA repository or a mirror
    of it: unversioned names from 580 on) or ``ubuntu`` (Ubuntu's own archive, apt only:
    ``-<branch>`` at every branch, since there the unversioned name is a virtual package that
    every branch's package Provides and Conflicts, which apt refuses to pick and a version
    pin cannot apply to).
    """
    number = branch_of(branch)
    if archive not in ARCHIVES:
        raise NvidiaPackageError("archive must be one of %s, got %r" % (", ".join(ARCHIVES), archive))
    if archive == "ubuntu":
        if _pkg_mgr(pkg_mgr) != APT:
            raise NvidiaPackageError("Ubuntu's archive is an apt archive, got package manager %r" % (pkg_mgr,))
        return ["nvidia-fabricmanager-%d" % number, "libnvidia-nscq-%d" % number]
    unversioned = number >= FIRST_UNVERSIONED_FM_BRANCH
    if _pkg_mgr(pkg_mgr) == APT:
        if unversioned:
            return ["nvidia-fabricmanager", "libnvidia-nscq"]
        return ["nvidia-fabricmanager-%d" % number, "libnvidia-nscq-%d" % number]
    if unversioned:
        return ["nvidia-fabricmanager", "libnvidia-nscq"]
    return ["nvidia-fabric-manager", "libnvidia-nscq-%d" % number]


# Fabric Manager and NSCQ under every naming NVIDIA has used (per branch before 580,
# unversioned from 580 on; dnf's nvidia-fabric-manager before 580).
_FM_NAME_RE = re.compile(r"^(nvidia-fabricmanager|nvidia-fabric-manager|libnvidia-nscq)(-[0-9]{3})?\Z")


_BRANCH_IN_NAME_RE = re.compile(r"-[0-9]{3}(?=-|\Z)")


def _branchless(name):
    """NAME with its branch number blanked: nvidia-utils-580-server -> nvidia-utils-N-server."""
    return _BRANCH_IN_NAME_RE.sub("-N", name)


def superseded_packages(installed, wanted, kmod_packages=()):
    """Installed driver packages that the new set WANTED replaces under another name.

    A branch change renames Fabric Manager and NSCQ (nvidia-fabricmanager-550 ->
    nvidia-fabricmanager at 580) and, on Ubuntu, every branch-named package
    (nvidia-utils-580-server -> nvidia-utils-595-server); a flavour change swaps the DKMS
    package. The old package stays installed and held, and it depends on the old driver's
    libraries exactly, so apt answers "pkgProblemResolver::Resolve generated breaks, this may
    be caused by held packages" (seen in molecule/metal, 550 -> 580). These must be unheld
    and removed before the new set is installed. INSTALLED: the names on the host;
    KMOD_PACKAGES: every flavour-specific package name of the role (all flavours).
    """
    wanted = set(wanted or ())
    kmods = set(kmod_packages or ())
    for name in list(wanted) + list(kmods) + list(installed or ()):
        if not isinstance(name, str):
            raise NvidiaPackageError("package names must be strings, got %r" % (name,))
    renamed = {_branchless(name) for name in wanted if _BRANCH_IN_NAME_RE.search(name)}
    stale = []
    for name in installed or ():
        if name in wanted:
            continue
        if _FM_NAME_RE.match(name) or name in kmods or (
                _BRANCH_IN_NAME_RE.search(name) and _branchless(name) in renamed):
            stale.append(name)
    return sorted(stale)


def _stanza_fields(text):
    """The fields of the first stanza of ``apt-cache show`` output (continuation lines joined)."""
    fields = {}
    key = None
    for line in re.split(r"\r\n|\r|\n", text or ""):
        if not line.strip():
            if fields:
                break
            continue
        if line[0] in " \t" and key:
            fields[key] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise NvidiaPackageError("unexpected apt-cache show line: %r" % line)
        key = key.strip().lower()
        fields[key] = value.strip()
    return fields


def transitional_target(show):
    """The package a transitional driver package only points at, or "".

    SHOW is ``apt-cache show PKG=VERSION``. Ubuntu retires a driver branch by turning its
    packages into empty ones that depend on the next branch's package of the same name
    (noble: nvidia-utils-590-server 590.48.01 Depends nvidia-utils-595-server). Installing
    such a branch installs the other one, which the lock does not name.
    """
    fields = _stanza_fields(show)
    name = fields.get("package", "")
    if not name:
        raise NvidiaPackageError("apt-cache show gave no Package field")
    if not _BRANCH_IN_NAME_RE.search(name):
        return ""
    depends = [part.strip() for part in fields.get("depends", "").split(",") if part.strip()]
    for dep in depends:
        dep_name = re.split(r"[\s(|:]", dep, maxsplit=1)[0]
        if dep_name != name and _branchless(dep_name) == _branchless(name):
            return dep_name
    return ""


def dnf_module_stream(branch, flavour):
    """``nvidia-driver:<branch>-open`` / ``nvidia-driver:<branch>-dkms`` (RHEL 8/9 modularity)."""
    if flavour not in FLAVOURS:
        raise NvidiaPackageError("kernel module flavour must be open or proprietary, got %r" % (flavour,))
    return "nvidia-driver:%d-%s" % (branch_of(branch), "open" if flavour == "open" else "dkms")


def rhel_crb_repository(distribution, major="9", arch="x86_64"):
    """The repository id of CodeReady Builder / CRB, which EPEL's dkms needs, on a RHEL 9 family host."""
    if distribution == "RedHat":
        return "codeready-builder-for-rhel-%s-%s-rpms" % (major, arch)
    if distribution in ("Rocky", "AlmaLinux", "CentOS", "OracleLinux"):
        return "ol%s_codeready_builder" % major if distribution == "OracleLinux" else "crb"
    raise NvidiaPackageError("no known CRB repository for distribution %r" % (distribution,))


def ubuntu_signed_module_packages(branch, flavour, kernel):
    """Canonical's signed precompiled modules for the running KERNEL (e.g. 6.8.0-45-generic)."""
    number = branch_of(branch)
    if flavour not in FLAVOURS:
        raise NvidiaPackageError("kernel module flavour must be open or proprietary, got %r" % (flavour,))
    kernel = str(kernel or "")
    if not _KERNEL_RE.match(kernel):
        raise NvidiaPackageError("%r is not an Ubuntu kernel release (like 6.8.0-45-generic)" % (kernel,))
    if flavour == "open":
        return ["linux-modules-nvidia-%d-server-open-%s" % (number, kernel), "linux-signatures-nvidia-%s" % kernel]
    return ["linux-objects-nvidia-%d-server-%s" % (number, kernel),
            "linux-modules-nvidia-%d-server-%s" % (number, kernel),
            "linux-signatures-nvidia-%s" % kernel]


def needs_unsigned_modules(install_kernel_module, module_source):
    """Whether the driver path builds unsigned (DKMS) modules that Secure Boot would reject."""
    if module_source not in MODULE_SOURCES:
        raise NvidiaPackageError("kernel module source must be one of %s, got %r"
                                 % (", ".join(MODULE_SOURCES), module_source))
    return bool(install_kernel_module) and module_source == "dkms"


# --- Debian version comparison (dpkg's algorithm, Debian Policy 5.6.12) ---------------

def _order(char):
    if char == "~":
        return -1
    if char.isdigit():
        return 0
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(left, right):
    while left or right:
        left_text = re.match(r"^[^0-9]*", left).group(0)
        right_text = re.match(r"^[^0-9]*", right).group(0)
        for index in range(max(len(left_text), len(right_text))):
            a = _order(left_text[index]) if index < len(left_text) else 0
            b = _order(right_text[index]) if index < len(right_text) else 0
            if a != b:
                return -1 if a < b else 1
        left, right = left[len(left_text):], right[len(right_text):]
        left_num = re.match(r"^[0-9]*", left).group(0)
        right_num = re.match(r"^[0-9]*", right).group(0)
        a, b = int(left_num or 0), int(right_num or 0)
        if a != b:
            return -1 if a < b else 1
        left, right = left[len(left_num):], right[len(right_num):]
    return 0


def _split_version(version):
    epoch, dummy, rest = version.rpartition(":") if ":" in version else ("0", "", version)
    upstream, dummy, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def compare_debian_versions(left, right):
    """-1, 0 or 1 as dpkg --compare-versions orders LEFT and RIGHT."""
    le, lu, lr = _split_version(left)
    re_, ru, rr = _split_version(right)
    if le != re_:
        return -1 if le < re_ else 1
    return _compare_part(lu, ru) or _compare_part(lr, rr)


def upstream_version(version):
    """580.95.05 of 1:580.95.05-0ubuntu1 (epoch and Debian revision dropped)."""
    text = str(version or "").strip()
    text = text.split(":", 1)[1] if ":" in text else text
    return text.rsplit("-", 1)[0] if "-" in text else text


def parse_madison(text):
    """``apt-cache madison PKG`` as [{"package", "version", "source"}] (one row per line)."""
    rows = []
    for line in re.split(r"\r\n|\r|\n", text or ""):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("|")]
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise NvidiaPackageError("unexpected apt-cache madison line: %r" % line)
        rows.append({"package": parts[0], "version": parts[1], "source": parts[2]})
    return rows


def choose_driver_version(madison, branch="", version="", installed=""):
    """The one upstream driver version a lock resolves to, from ``apt-cache madison`` output.

    An exact lock (VERSION) must be offered. A branch lock keeps the INSTALLED version when it
    is of the branch and still offered (a re-run changes nothing), else takes the newest
    offered of the branch. Returns "" when nothing offered matches.
    """
    if bool(str(branch or "")) == bool(str(version or "")):
        raise NvidiaPackageError("give exactly one of branch and version (got branch=%r, version=%r)"
                                 % (branch, version))
    offered = sorted({row["version"] for row in parse_madison(madison)},
                     key=_debian_key, reverse=True)
    uppers = [upstream_version(v) for v in offered]
    if version:
        if not _UPSTREAM_RE.match(str(version)):
            raise NvidiaPackageError("%r is not a driver version (like 580.95.05)" % (version,))
        return str(version) if str(version) in uppers else ""
    number = branch_of(branch)
    in_branch = [u for u in uppers if u.split(".")[0] == str(number)]
    if upstream_version(installed) in in_branch:
        return upstream_version(installed)
    return in_branch[0] if in_branch else ""


class _debian_key(object):
    """Sort key ordering Debian versions as dpkg does."""

    def __init__(self, version):
        self.version = version

    def __lt__(self, other):
        return compare_debian_versions(self.version, other.version) < 0

    def __eq__(self, other):
        return compare_debian_versions(self.version, other.version) == 0


# --- Existing CUDA repository (cuda-keyring) ----------------------------------------

def _apt_entries(path, text):
    """(uri, signed_by) of every deb entry of a one-line .list or a deb822 .sources file."""
    entries = []
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            key = None
            for line in stanza.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if line[0] in " \t" and key:
                    fields[key] += " " + line.strip()
                    continue
                key, dummy, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
            if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
                continue
            for uri in fields.get("uris", "").split():
                entries.append((uri, fields.get("signed-by", "")))
        return entries
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)", line)
        if not match:
            continue
        options = dict(opt.split("=", 1) for opt in (match.group(1) or "").split() if "=" in opt)
        entries.append((match.group(2), options.get("signed-by", "")))
    return entries


def _norm_uri(uri):
    return re.sub(r"^https?://", "", uri.strip()).rstrip("/").lower()


def find_cuda_sources(files, repo_uri, own_paths=()):
    """apt sources, other than OWN_PATHS, that already point at REPO_URI (NVIDIA's CUDA repo).

    FILES maps a path under /etc/apt to its text. A host with NVIDIA's cuda-keyring (DGX OS,
    vendor and cloud images) has /etc/apt/sources.list.d/cuda-<distro>-x86_64.list signed by
    /usr/share/keyrings/cuda-archive-keyring.gpg; a second entry for the same URI with another
    Signed-By makes apt refuse to update. Returns [{"path", "uri", "signed_by"}], by path.
    """
    if not isinstance(files, dict):
        raise NvidiaPackageError("expected a mapping of apt source paths to their text, got %s"
                                 % type(files).__name__)
    if not isinstance(repo_uri, str) or not repo_uri.strip():
        raise NvidiaPackageError("expected the repository URI, got %r" % (repo_uri,))
    wanted = _norm_uri(repo_uri)
    found = []
    for path in sorted(files):
        if path in own_paths or not (path.endswith(".list") or path.endswith(".sources")):
            continue
        text = files[path]
        if not isinstance(text, str):
            raise NvidiaPackageError("the text of %s is not a string" % path)
        for uri, signed_by in _apt_entries(path, text):
            if _norm_uri(uri) == wanted:
                found.append({"path": path, "uri": uri, "signed_by": signed_by})
    return found


# --- cuDNN and NCCL -------------------------------------------------------------------

def _cuda_parts(cuda_version):
    text = str(cuda_version or "")
    if not _CUDA_RE.match(text):
        raise NvidiaPackageError("%r is not a CUDA toolkit version (MAJOR.MINOR, like 12.4)" % (cuda_version,))
    return text.split(".")


# cuDNN versions have four components (9.19.0.56); version locks often name only a prefix.
CUDNN_VERSION_PARTS = 4


def version_pattern(version, full_parts, full_suffix):
    """The apt/dnf version glob for VERSION, given in full or as a prefix of components.

    A full version (FULL_PARTS components, 9.19.0.56) is followed by FULL_SUFFIX (its release,
    e.g. ``-*``); a prefix (9.19) matches every version under it: ``9.19.*``, which takes
    9.19.0.56-1 but not 9.190.0.1 (``9.19-*`` matched nothing: no cuDNN is version 9.19).
    """
    version = str(version or "")
    parts = version.split(".")
    if not version or not all(part.isdigit() for part in parts) or len(parts) > full_parts:
        raise NvidiaPackageError("%r is not a version of at most %d numeric components" % (version, full_parts))
    return version + (full_suffix if len(parts) == full_parts else ".*")


def version_matches(wanted, found):
    """Whether FOUND (a header's 9.19.0) is the version WANTED names, comparing only the
    components both give: 9.19 takes 9.19.0, 9.19.0.56 takes 9.19.0 (a header has no build),
    9.1 does not take 9.19.0. An unreadable component ('?') never matches."""
    wanted_parts = str(wanted or "").split(".")
    found_parts = str(found or "").split(".")
    if not all(part.isdigit() for part in wanted_parts):
        raise NvidiaPackageError("%r is not a version (numeric components)" % (wanted,))
    shared = min(len(wanted_parts), len(found_parts))
    return [int(p) for p in wanted_parts[:shared]] == [int(p) if p.isdigit() else None for p in found_parts[:shared]]


def cudnn_packages(major, cuda_version, pkg_mgr, repo_distro, version=""):
    """cuDNN runtime and development packages, with their version constraint.

    apt: cuDNN 9 is named per CUDA major (libcudnn9-cuda-12=9.x.y.z-1); cuDNN 8 has one name
    and the CUDA build in the version (libcudnn8=8.9.7.29-1+cuda12.2), matched on the CUDA
    major because 8.9 was built for one minor of each major. dnf: pkg=VERSION* (every entry is
    name=version, as gpucloud.fleet.packages_present takes it for apt and dnf alike). A VERSION of
    fewer than four components (9.19, a version lock's) matches every release under it.
    """
    cuda_major = _cuda_parts(cuda_version)[0]
    major = str(major)
    version = str(version or "")
    if version and not (_CUDNN_RE.match(version) and version.split(".", maxsplit=1)[0] == major):
        raise NvidiaPackageError("cuDNN version %r is not a cuDNN %s version (like %s.1.0.70)" % (version, major, major))
    _pkg_mgr(pkg_mgr)
    if major == "9":
        if cuda_major not in ("12", "13"):
            raise NvidiaPackageError("cuDNN 9 is built for CUDA 12 and 13, not CUDA %s" % cuda_version)
        dev = "libcudnn9-dev-cuda-%s" if pkg_mgr == APT else "libcudnn9-devel-cuda-%s"
        names = ["libcudnn9-cuda-%s" % cuda_major, dev % cuda_major]
        suffix = ""
        if version:
            suffix = "=" + version_pattern(version, CUDNN_VERSION_PARTS, "-*" if pkg_mgr == APT else "*")
        return [name + suffix for name in names]
    if major == "8":
        if repo_distro in NO_CUDNN8_DISTROS:
            raise NvidiaPackageError(
                "NVIDIA publishes no cuDNN 8 for %s (its last release, 8.9.7, predates it); "
                "set cuda_toolkit_cudnn to 9" % repo_distro)
        if cuda_major not in ("11", "12"):
            raise NvidiaPackageError("cuDNN 8 is built for CUDA 11 and 12, not CUDA %s" % cuda_version)
        names = ["libcudnn8", "libcudnn8-dev" if pkg_mgr == APT else "libcudnn8-devel"]
        pattern = version_pattern(version or "8.9", CUDNN_VERSION_PARTS, "-1")
        if pkg_mgr == APT:
            suffix = "=%s+cuda%s.*" % (pattern, cuda_major)
        else:
            suffix = "=%s.cuda%s.*" % (pattern, cuda_major)
        return [name + suffix for name in names]
    raise NvidiaPackageError("cuDNN major must be 8 or 9, got %r" % (major,))


def nccl_packages(version, cuda_version, pkg_mgr):
    """NCCL runtime and development packages at VERSION built for the CUDA toolkit MAJOR.MINOR.

    NVIDIA's repositories: libnccl2 / libnccl-dev ``2.26.2-1+cuda12.8`` (apt) and
    libnccl / libnccl-devel ``2.26.2-1+cuda12.8`` (dnf), as name=version for either
    (gpucloud.fleet.packages_present).
    """
    version = str(version or "")
    if not _NCCL_RE.match(version):
        raise NvidiaPackageError("NCCL version %r is not MAJOR.MINOR.PATCH (like 2.26.2)" % (version,))
    cuda = ".".join(_cuda_parts(cuda_version))
    if _pkg_mgr(pkg_mgr) == APT:
        return ["libnccl2=%s-1+cuda%s" % (version, cuda), "libnccl-dev=%s-1+cuda%s" % (version, cuda)]
    return ["libnccl=%s-1+cuda%s" % (version, cuda), "libnccl-devel=%s-1+cuda%s" % (version, cuda)]


# --- nvidia-persistenced ---------------------------------------------------------------

def parse_exec_start(text):
    """The argv of ExecStart from a unit file's text (its last ``ExecStart=`` line), from
    ``systemctl show -p ExecStart --value`` (``{ path=... ; argv[]=... ; ... }``) or a command line."""
    text = (text or "").strip()
    lines = [line.strip()[len("ExecStart="):] for line in text.splitlines() if line.strip().startswith("ExecStart=")]
    if lines:
        text = lines[-1].strip()
    elif "\n" in text:
        text = ""
    match = re.search(r"argv\[\]=([^;]*)", text)
    if match:
        return match.group(1).split()
    # systemd prefixes ("-", "@", "+", "!") change how the command runs, not its argv.
    return text.lstrip("-@+!").split()


def persistenced_override(exec_start):
    """Text of a systemd drop-in that restarts nvidia-persistenced without --no-persistence-mode.

    EXEC_START is the packaged unit file's text, systemctl show's ExecStart or a command line
    (read the unit file, not the effective ExecStart, which a drop-in already changed).
    Returns "" when the flag is absent (no override needed). Ubuntu's nvidia-compute-utils
    unit runs ``nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose``.
    """
    argv = parse_exec_start(exec_start)
    if not argv:
        raise NvidiaPackageError("nvidia-persistenced has no ExecStart to override")
    if NO_PERSISTENCE_FLAG not in argv:
        return ""
    kept = [arg for arg in argv if arg != NO_PERSISTENCE_FLAG]
    return ("[Service]\n"
            "# The packaged unit starts the daemon with %s, which leaves persistence off.\n"
            "ExecStart=\n"
            "ExecStart=%s\n") % (NO_PERSISTENCE_FLAG, " ".join(kept))


# --- The driver's package plan ---------------------------------------------------------------

_PLAN_LISTS = ("packages", "extra_packages", "userspace_packages", "unversioned_packages", "fabric_manager_packages",
               "build_packages")


def driver_package_plan(madison, settings):
    """The nvidia_driver role's whole package plan, from one ``apt-cache madison`` read.

    MADISON: ``apt-cache madison <primary package>`` (ignored with dnf). SETTINGS: pkg_mgr,
    branch / version (the lock, one of them), installed (the primary package's installed
    version or ""), lock_branch, lock_pattern (the lock as a version pattern, used while no
    offered version is known), packages (nvidia_driver_packages: replaces the role's own
    list), extra_packages, userspace_packages, flavour_packages / kmod_packages ({flavour:
    [...]}), flavour, install_kernel_module, module_source (dkms / ubuntu_signed), kernel,
    fabric_manager (bool), fabric_manager_packages, unversioned_packages, build_packages.

    Returns versioned (installed and pinned at the one version; Fabric Manager and NSCQ with
    them on apt), unversioned, build_deps, fm_dnf (installed after the driver at its version on
    dnf), version (the resolved upstream version, "" when apt offers none of the lock),
    offered (every version madison lists), offered_full (the full versions of the resolved
    one, newest first, for ``apt-cache show``), install_pattern (what the pin file and the
    install name) and install (the package_present entries, name=pattern).
    """
    if not isinstance(settings, dict):
        raise NvidiaPackageError("settings must be a mapping, got %r" % (settings,))
    pkg_mgr = _pkg_mgr(settings.get("pkg_mgr"))
    lists = {}
    for key in _PLAN_LISTS:
        value = settings.get(key) or []
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
                isinstance(item, str) and item for item in value):
            raise NvidiaPackageError("%s must be a list of package names, got %r" % (key, value))
        lists[key] = list(value)
    flavour = settings.get("flavour")
    if flavour not in FLAVOURS:
        raise NvidiaPackageError("flavour must be one of %s, got %r" % (", ".join(FLAVOURS), flavour))
    module = bool(settings.get("install_kernel_module"))
    source = settings.get("module_source")
    if module and source not in MODULE_SOURCES:
        raise NvidiaPackageError("module_source must be one of %s, got %r" % (", ".join(MODULE_SOURCES), source))
    dkms = module and source == "dkms"
    fabric = lists["fabric_manager_packages"] if settings.get("fabric_manager") else []
    own = (lists["userspace_packages"] + list((settings.get("flavour_packages") or {}).get(flavour, []))
           + (list((settings.get("kmod_packages") or {}).get(flavour, [])) if dkms else []))
    base = lists["packages"] if lists["packages"] else own
    versioned = []
    for name in base + lists["extra_packages"] + (fabric if pkg_mgr == APT else []):
        if name not in versioned:
            versioned.append(name)
    signed = []
    if module and source == "ubuntu_signed":
        signed = ubuntu_signed_module_packages(settings.get("lock_branch"), flavour, settings.get("kernel"))
    unversioned = lists["unversioned_packages"] + signed
    plan = {
        "versioned": versioned,
        "unversioned": unversioned,
        "build_deps": lists["build_packages"] if dkms else [],
        "fm_dnf": fabric if pkg_mgr == DNF else [],
        "version": "",
        "offered": [],
        "offered_full": [],
    }
    branch, version = str(settings.get("branch") or ""), str(settings.get("version") or "")
    if pkg_mgr == APT:
        rows = parse_madison(madison)
        plan["offered"] = [row["version"] for row in rows]
        plan["version"] = choose_driver_version(madison, branch=branch, version=version,
                                                installed=settings.get("installed") or "")
        plan["offered_full"] = sorted({v for v in plan["offered"] if upstream_version(v) == plan["version"]},
                                      key=_debian_key, reverse=True) if plan["version"] else []
        pattern = (plan["version"] + "-*") if plan["version"] else str(settings.get("lock_pattern") or "")
    else:
        pattern = (version + "*") if version else (branch + ".*")
    if not pattern:
        raise NvidiaPackageError("lock_pattern must name the lock as a version pattern when nothing is offered")
    plan["install_pattern"] = pattern
    plan["install"] = ["%s=%s" % (name, pattern) for name in versioned] + unversioned
    return plan
