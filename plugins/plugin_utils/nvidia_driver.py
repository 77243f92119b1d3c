# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_driver role's decisions, one function per stage of the role.

- ``settings_problems``: every refusal of the role's settings (tasks/validate.yml), each
  naming its variable, before anything changes the host.
- ``driver_state``: what the host has (GPUs on the PCI bus, the loaded module, the installed
  driver), the kernel module flavour and the drift from the lock (tasks/facts.yml).
- ``package_plan``: the package plan over one read of ``apt-cache madison`` and ``apt-cache
  show`` (tasks/packages.yml): the names and the one version (nvidia_packages.driver_package_plan),
  the refusal of a lock the archive carries only as transitional packages, the packages the
  new set replaces under another name.

Controller-only (plugins/plugin_utils): the filters in plugins/filter/nvidia_driver.py call
these; nothing here reaches a node.
"""

import json
import re

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nvidia_packages as np

NvidiaDriverError = np.NvidiaPackageError

SUPPORTED_OS = ("Debian 12", "Debian 13", "Ubuntu 22", "Ubuntu 24")
CUDA_REPO_DISTROS = ("debian12", "ubuntu2204", "ubuntu2404", "rhel9")
KERNEL_MODULES = ("auto",) + np.FLAVOURS

# The marker the facts read prints between the PCI devices and /proc/driver/nvidia/version,
# and the packages read between apt-cache madison and apt-cache show.
PROC_VERSION_MARKER = "# /proc/driver/nvidia/version"
SHOW_MARKER = "# apt-cache show"

_LOADED_RE = re.compile(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9.]+)")
_WHOLE_SECONDS_RE = re.compile(r"[0-9]+")
_MIRROR_URL_RE = re.compile(r"(https?|file)://")


def _text(value):
    """VALUE as Jinja's ``| string`` writes it (None -> "None", 580 -> "580")."""
    return value if isinstance(value, str) else str(value)


def _json(value):
    """VALUE as Jinja's ``| to_json`` writes it, for messages."""
    return json.dumps(value)


def _lock_text(version, branch):
    return ("version " + version) if version else ("branch " + branch)


def settings_problems(settings):
    """Every refusal of the role's settings, as messages that name the variable; [] when none.

    SETTINGS (raw values, as the inventory gave them): version, branch, reboot_timeout, source,
    kernel_module_source, signed_kmod_supported, distribution, distribution_major_version,
    distribution_version, os_family, sources_supported, cuda_repo_distro, mirror_url,
    mirror_key, fabric_manager, fabric_manager_packages (None when not asked), version_regex,
    branch_regex.
    A float version or branch (YAML's unquoted 570.10) and a timeout that is not a whole number
    of seconds above 0 are refused alone: the other checks would only repeat them.
    """
    if not isinstance(settings, dict):
        raise NvidiaDriverError("settings must be a mapping, got %r" % (settings,))
    floats = [name for name in ("nvidia_driver_version", "nvidia_driver_branch")
              if isinstance(settings.get(name.replace("nvidia_driver_", "")), float)]
    first = []
    if floats:
        first.append("%s: an unquoted number is read by YAML as a float, which drops digits (12.10 becomes 12.1, "
                     "570.10 becomes 570.1); quote it, e.g. \"570.10\" or [\"12.10\"]." % ", ".join(floats))
    timeout = settings.get("reboot_timeout")
    if isinstance(timeout, bool) or not _WHOLE_SECONDS_RE.fullmatch(_text(timeout)) or int(_text(timeout)) <= 0:
        first.append("nvidia_driver_reboot_timeout: %s must be a whole number of seconds greater than 0 "
                     "(0 would give up at once, before the host could come back)" % _json(timeout))
    if first:
        return first

    problems = []
    version, branch = _text(settings.get("version")), _text(settings.get("branch"))
    if ((len(version) > 0) == (len(branch) > 0)
            or (version and not re.fullmatch(settings["version_regex"], version))
            or (branch and not re.fullmatch(settings["branch_regex"], branch))):
        problems.append(
            "Set exactly one of nvidia_driver_version (an upstream driver version such as 580.159.04 or 570.26) "
            "and nvidia_driver_branch (a branch such as 580); got nvidia_driver_version=%s, nvidia_driver_branch=%s."
            % (_json(version), _json(branch)))

    source = settings.get("source")
    distribution = _text(settings.get("distribution"))
    major = _text(settings.get("distribution_major_version"))
    supported = list(settings.get("sources_supported") or [])
    os_ok = ("%s %s" % (distribution, major)) in SUPPORTED_OS or (
        settings.get("os_family") == "RedHat" and major == "9")
    if not os_ok or source not in supported or (
            source == "cuda_repo" and settings.get("cuda_repo_distro") not in CUDA_REPO_DISTROS):
        problems.append(
            "nvidia_driver_source=%s is not supported on %s %s (supported OS: %s, RHEL 9 family; sources here: %s; "
            "NVIDIA's CUDA repository: %s)." % (
                source, distribution, settings.get("distribution_version"), ", ".join(SUPPORTED_OS),
                ", ".join(supported) or "none", ", ".join(CUDA_REPO_DISTROS)))

    module_source = settings.get("kernel_module_source")
    if module_source != "dkms" and not (settings.get("signed_kmod_supported") and source == "distro"):
        problems.append(
            "nvidia_driver_kernel_module_source=%s needs Ubuntu and nvidia_driver_source=distro (Canonical's "
            "linux-modules-nvidia-<branch>-server-open-<kernel> match the Ubuntu archive's -server driver, not "
            "NVIDIA's repository); got %s with nvidia_driver_source=%s. Use dkms there."
            % (module_source, distribution, source))

    if source == "mirror":
        url, key = _text(settings.get("mirror_url")), _text(settings.get("mirror_key"))
        if not _MIRROR_URL_RE.match(url) or "BEGIN PGP PUBLIC KEY BLOCK" not in key:
            problems.append(
                "nvidia_driver_source=mirror needs nvidia_driver_mirror_url (http://, https:// or file://, got %s) "
                "and nvidia_driver_mirror_key (the ASCII-armored public key that signs the repository)."
                % _json(url))

    # None: not asked (no Fabric Manager, or a lock too malformed to name its packages).
    packages = settings.get("fabric_manager_packages")
    if settings.get("fabric_manager") and packages is not None and not packages:
        problems.append(
            "nvidia_driver_fabric_manager=true, but nvidia_driver_source=%s has no Fabric Manager package on %s "
            "(Debian does not package it): use cuda_repo or a mirror of NVIDIA's repository."
            % (source, distribution))
    return problems


def _split(text, marker):
    """TEXT before and after the line MARKER ("" after when the marker is missing)."""
    lines = (text or "").splitlines()
    if marker in lines:
        at = lines.index(marker)
        return "\n".join(lines[:at]), "\n".join(lines[at + 1:])
    return "\n".join(lines), ""


def upstream_of_package(version):
    """The upstream part of a package version: 1:580.95.05-0ubuntu1 -> 580.95.05 ("" for none)."""
    return re.sub(r"-.*\Z", "", re.sub(r"\A[0-9]+:", "", _text(version or "")), flags=re.S)


def driver_state(reads, settings):
    """What the host has and the kernel module flavour the role installs.

    READS: the facts read's output (one line ``<PCI address> <device id>`` per NVIDIA display
    or 3D controller, the line PROC_VERSION_MARKER, then /proc/driver/nvidia/version, empty
    when no module is loaded). SETTINGS: installed_package_version (the primary package's
    version from package_facts, "" when not installed), smi_architectures (the architectures
    nvidia_gpu_info reported, None when it did not run), kernel_module (auto / open /
    proprietary), open_architectures, first_turing_device_id, version / branch (the lock).

    Returns gpus (PCI addresses), loaded, installed (upstream versions, "" for none),
    ask_smi (whether nvidia-smi can name the architectures: the loaded module is the installed
    one and the flavour is auto), architectures, flavour, pre_turing and drift (the installed
    driver is not the lock).
    """
    if not isinstance(settings, dict):
        raise NvidiaDriverError("settings must be a mapping, got %r" % (settings,))
    kernel_module = settings.get("kernel_module")
    if kernel_module not in KERNEL_MODULES:
        raise NvidiaDriverError("nvidia_driver_kernel_module must be one of %s, got %r"
                                % (", ".join(KERNEL_MODULES), kernel_module))
    pci_text, proc_text = _split(reads, PROC_VERSION_MARKER)
    gpus, ids = [], []
    for line in pci_text.splitlines():
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise NvidiaDriverError("unexpected PCI device line %r (expected '<address> <device id>')" % line)
        try:
            ids.append(int(fields[1], 16))
        except ValueError as exc:
            raise NvidiaDriverError("unexpected PCI device id in %r" % line) from exc
        gpus.append(fields[0])
    found = _LOADED_RE.findall(proc_text)
    loaded = found[0] if found else ""
    installed = upstream_of_package(settings.get("installed_package_version"))
    smi = [arch for arch in (settings.get("smi_architectures") or []) if arch is not None]
    architectures = []
    for arch in smi:
        if arch not in architectures:
            architectures.append(arch)
    if smi:
        pre_turing = [arch for arch in smi if arch not in settings.get("open_architectures", [])]
    else:
        pre_turing = [device for device in ids if device < int(settings["first_turing_device_id"])]
    if kernel_module != "auto":
        flavour = kernel_module
    else:
        flavour = "proprietary" if pre_turing else "open"
    version, branch = _text(settings.get("version") or ""), _text(settings.get("branch") or "")
    drift = bool(installed) and not (installed == version if version else installed.split(".")[0] == branch)
    return {
        "gpus": gpus,
        "loaded": loaded,
        "installed": installed,
        "ask_smi": kernel_module == "auto" and bool(loaded) and loaded == installed,
        "architectures": architectures,
        "pre_turing": bool(pre_turing),
        "flavour": flavour,
        "drift": drift,
    }


def _stanzas(text):
    """The stanzas of ``apt-cache show`` output, each as its text."""
    return [block.strip("\n") for block in re.split(r"\n[ \t]*\n", (text or "").replace("\r\n", "\n"))
            if block.strip()]


def package_plan(reads, settings):
    """The package plan (nvidia_packages.driver_package_plan) with what the role refuses and replaces.

    READS: ``apt-cache madison PKG``, the line SHOW_MARKER, ``apt-cache show PKG`` (every
    offered version's record; "" with dnf). SETTINGS: driver_package_plan's, plus
    primary (PKG), installed_names (every installed package's name), all_flavour_packages (every
    flavour- and kernel-module-specific name of the role), check_mode, hold, source.

    Refuses, naming the lock's variable, a lock no repository offers (apt, not in check mode,
    which cannot refresh the lists) and a lock whose package is only a transitional one that
    installs another branch. Adds transitional ("" or the package it points at), superseded
    (installed packages the new set replaces under another name) and record (version, install,
    remove, hold: what the role reports as nvidia_driver_plan).
    """
    if not isinstance(settings, dict):
        raise NvidiaDriverError("settings must be a mapping, got %r" % (settings,))
    madison, show = _split(reads, SHOW_MARKER)
    plan = np.driver_package_plan(madison, settings)
    version, branch = _text(settings.get("version") or ""), _text(settings.get("branch") or "")
    primary = settings.get("primary")
    lock = _lock_text(version, branch)
    plan["transitional"] = ""
    if settings.get("pkg_mgr") == np.APT:
        if not plan["version"] and not settings.get("check_mode"):
            raise NvidiaDriverError(
                "No configured repository offers %s at the locked %s (nvidia_driver_source=%s); offered: %s."
                % (primary, lock, settings.get("source"), ", ".join(plan["offered"]) or "nothing"))
        if plan["version"]:
            wanted = plan["offered_full"][0]
            records = [stanza for stanza in _stanzas(show)
                       if re.search(r"(?m)^Version:[ \t]*%s[ \t]*$" % re.escape(wanted), stanza)
                       and re.search(r"(?m)^Package:[ \t]*%s[ \t]*$" % re.escape(primary), stanza)]
            if not records:
                raise NvidiaDriverError("apt-cache show %s gave no record of version %s" % (primary, wanted))
            plan["transitional"] = np.transitional_target(records[0])
            if plan["transitional"]:
                raise NvidiaDriverError(
                    "%s: %s %s is a transitional package that only installs %s (the archive retired branch %s); "
                    "lock the branch it points at instead." % (
                        ("nvidia_driver_version=" + version) if version else ("nvidia_driver_branch=" + branch),
                        primary, plan["version"], plan["transitional"], settings.get("lock_branch")))
    names = plan["versioned"] + plan["unversioned"]
    plan["superseded"] = np.superseded_packages(settings.get("installed_names") or [], names,
                                                settings.get("all_flavour_packages") or [])
    plan["record"] = {"version": plan["version"], "install": names, "remove": plan["superseded"],
                      "hold": names if settings.get("hold") else []}
    return plan
