# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Build the nvsim stand-in driver packages and a signed flat apt repository.

Usage: python3 build_repo.py OUTDIR [--container-toolkit VERSION]... [--no-driver]
(scripts/nvsim/build-repo.sh wraps it)

OUTDIR/repo/    the flat repository: *.deb, Packages(.gz), Release, InRelease, Release.gpg, key.asc
OUTDIR/key.asc  the throwaway signing key (public part)
OUTDIR/gnupg/   GNUPGHOME holding the throwaway private key

``--container-toolkit VERSION`` adds the stand-in NVIDIA Container Toolkit packages of
that version (``container_toolkit_specs``); ``--no-driver`` leaves the driver packages out.

Everything is a gpucloud lab stand-in, not NVIDIA software.  ``package_specs``
is pure (the package list, control fields and files) and unit-tested.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

VERSIONS = ("550.163.01", "580.95.05")
REVISION = "1~gpucloudsim1"
MAINTAINER = "gpucloud lab <lab@gpucloud.invalid>"
STANDIN = "gpucloud lab stand-in, not NVIDIA software"
# NVIDIA names Fabric Manager and NSCQ per branch up to 575 and unversioned from 580 on.
FIRST_UNVERSIONED_FM_BRANCH = 580

# Captures the simulated nvidia-smi answers from: installed path under /usr/share/nvsim -> fixture.
CAPTURES = {
    "h200/nvidia-smi_-q_-x.xml": "h200-ubuntu2404-driver580/nvidia-smi_-q_-x.xml",
    "h200/nvidia-smi_-q.txt": "h200-ubuntu2404-driver580/nvidia-smi_-q.txt",
    "h200/nvidia-smi.txt": "h200-ubuntu2404-driver580/nvidia-smi.txt",
    "h200/nvidia-smi_topo_-m.txt": "h200-ubuntu2404-driver580/nvidia-smi_topo_-m.txt",
    "a100/nvidia-smi_-q_-x.xml": "public/smi_xml/a100-sxm4-40gb-mig-510-v11-netdata-reindented.txt",
}

PYTHON_LAUNCHER = """#!/usr/bin/python3
# {standin}: {what}, userspace version {version}.
import sys

from {module} import main

sys.exit(main({args}))
"""

DKMS_CONF = """# {standin}
PACKAGE_NAME="nvidia"
PACKAGE_VERSION="{version}"
BUILT_MODULE_NAME[0]="nvidia"
DEST_MODULE_LOCATION[0]="/updates/dkms"
BUILT_MODULE_NAME[1]="nvidia-peermem"
DEST_MODULE_LOCATION[1]="/updates/dkms"
AUTOINSTALL=yes
"""

KBUILD = """# {standin}
NVSIM_GCC := $(shell $(CC) -v 2>&1 | tail -n 1)
ccflags-y += -DNVSIM_VERSION='"{version}"' -DNVSIM_OPEN={open_flag} -DNVSIM_DATE='"{date}"' -DNVSIM_GCC='"$(NVSIM_GCC)"'
obj-m := nvidia.o nvidia-peermem.o
"""

DKMS_POSTINST = """#!/bin/sh
# {standin}. As Debian's DKMS packages (dh_dkms): build and install the module for the
# installed kernels that have headers; load nothing (the next boot loads it).
set -e
if [ "$1" = configure ]; then
    /usr/lib/dkms/common.postinst nvidia {version} "" "" "$2"
fi
"""

DKMS_PRERM = """#!/bin/sh
# {standin}. As Debian's DKMS packages (dh_dkms).
set -e
case "$1" in
    remove|upgrade|deconfigure)
        dkms remove -m nvidia -v {version} --all || true
        ;;
esac
"""

SYSTEMD_POSTINST = """#!/bin/sh
# {standin}. The role enables and starts the unit; a new unit file needs a reload.
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
"""

PERSISTENCED_UNIT = """# {standin}
[Unit]
Description=NVIDIA Persistence Daemon ({standin})
Wants=syslog.target

[Service]
Type=notify
NotifyAccess=main
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""

FABRICMANAGER_UNIT = """# {standin}
[Unit]
Description=NVIDIA fabric manager service ({standin})
After=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg

[Install]
WantedBy=multi-user.target
"""


# NVIDIA Container Toolkit stand-ins: the four packages NVIDIA's install guide names
# (NVIDIA/cloud-native-docs container-toolkit/install-guide.md, commit
# 01f0197c90e918c65883c6c2cb5d9cc3653ebde7). Where the real binaries live: the base package
# carries nvidia-ctk and nvidia-container-runtime (NVIDIA/nvidia-container-toolkit v1.17.8,
# packaging/debian/nvidia-container-toolkit-base.install).
TOOLKIT_VERSIONS = ("1.17.8",)
RUNTIME_LOG = "/var/log/nvidia-container-runtime-standin.log"

RUNTIME_STANDIN = """#!/bin/sh
# {standin}: nvidia-container-runtime {version}.
# Logs its arguments (one line per call, to {log}) and runs runc with the very same
# arguments: it changes nothing in the container, it only proves that it was called.
printf '%s pid=%s argv=%s\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$$" "$*" >> {log} 2>/dev/null || true
exec /usr/bin/runc "$@"
"""


def container_toolkit_specs(version):
    """The stand-in NVIDIA Container Toolkit packages of one toolkit VERSION (pure)."""
    exact = "(= %s-%s)" % (version, REVISION)
    marker = "/usr/share/doc/%s/nvsim-version"
    ctk = read(os.path.join(HERE, "nvsim_ctk.py")).replace('VERSION = "0.0.0"', 'VERSION = "%s"' % version)
    base_files = {
        "/usr/bin/nvidia-ctk": launcher("stand-in nvidia-ctk", "nvsim_ctk", version, "sys.argv[1:]"),
        "/usr/lib/python3/dist-packages/nvsim_ctk.py": (ctk, 0o644),
        "/usr/bin/nvidia-container-runtime": (RUNTIME_STANDIN.format(standin=STANDIN, version=version,
                                                                     log=RUNTIME_LOG), 0o755),
        marker % "nvidia-container-toolkit-base": (version + "\n", 0o644),
    }
    return [
        package("nvidia-container-toolkit-base", version,
                "NVIDIA Container Toolkit base, stand-in nvidia-ctk and runtime (%s)" % STANDIN,
                depends=["python3", "python3-yaml", "runc"], files=base_files),
        package("nvidia-container-toolkit", version, "NVIDIA Container Toolkit, stand-in (%s)" % STANDIN,
                depends=["nvidia-container-toolkit-base %s" % exact, "libnvidia-container-tools %s" % exact],
                files={marker % "nvidia-container-toolkit": (version + "\n", 0o644)}),
        package("libnvidia-container-tools", version,
                "NVIDIA container runtime library tools placeholder (%s)" % STANDIN,
                depends=["libnvidia-container1 %s" % exact],
                files={marker % "libnvidia-container-tools": (version + "\n", 0o644)}),
        package("libnvidia-container1", version, "NVIDIA container runtime library placeholder (%s)" % STANDIN,
                files={marker % "libnvidia-container1": (version + "\n", 0o644)}),
    ]


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def fm_names(version):
    """(Fabric Manager, NSCQ) package names NVIDIA uses for VERSION's branch."""
    branch = int(version.split(".")[0])
    if branch >= FIRST_UNVERSIONED_FM_BRANCH:
        return "nvidia-fabricmanager", "libnvidia-nscq"
    return "nvidia-fabricmanager-%d" % branch, "libnvidia-nscq-%d" % branch


def ubuntu_compute_name(version):
    """Ubuntu's name of the package that carries NVML in VERSION's server driver branch."""
    return "libnvidia-compute-%s-server" % version.split(".")[0]


def package(name, version, description, depends=(), files=None, scripts=None, conffiles=(), extra=None):
    return {
        "name": name,
        "version": "%s-%s" % (version, REVISION),
        "depends": list(depends),
        "description": description,
        "files": files or {},
        "scripts": scripts or {},
        "conffiles": list(conffiles),
        "extra": extra or {},
    }


def launcher(what, module, version, args):
    return (PYTHON_LAUNCHER.format(standin=STANDIN, what=what, version=version, module=module, args=args), 0o755)


def daemon_program(version):
    source = read(os.path.join(HERE, "nvsim_daemons.py")).replace('VERSION = "0.0.0"', 'VERSION = "%s"' % version)
    return ("#!/usr/bin/python3\n" + source, 0o755)


def dkms_package(name, version, open_modules, date, other):
    src = "/usr/src/nvidia-%s/" % version
    standin = {"standin": STANDIN, "version": version}
    files = {
        src + "dkms.conf": (DKMS_CONF.format(**standin), 0o644),
        src + "Kbuild": (KBUILD.format(open_flag=1 if open_modules else 0, date=date, **standin), 0o644),
        src + "nvidia.c": (read(os.path.join(HERE, "kmod", "nvidia.c")), 0o644),
        src + "nvidia-peermem.c": (read(os.path.join(HERE, "kmod", "nvidia-peermem.c")), 0o644),
        # A VM has no NVIDIA PCI device, so udev's modalias match never loads the module: load it at boot.
        "/etc/modules-load.d/nvidia-standin.conf": ("# %s: load the stand-in module at boot\nnvidia\n" % STANDIN, 0o644),
    }
    flavour = "open" if open_modules else "proprietary"
    return package(
        name, version, "NVIDIA %s kernel module stub, DKMS source (%s)" % (flavour, STANDIN),
        depends=["dkms"], files=files,
        scripts={"postinst": DKMS_POSTINST.format(**standin), "prerm": DKMS_PRERM.format(**standin)},
        conffiles=["/etc/modules-load.d/nvidia-standin.conf"],
        extra={"Conflicts": other, "Replaces": other, "Provides": "nvidia-kernel-dkms-any"},
    )


def package_specs(version, date="Tue Dec  1 00:00:00 UTC 2026"):
    """Every stand-in package of one driver VERSION (pure, but reads the sources in scripts/nvsim)."""
    full = "%s-%s" % (version, REVISION)
    exact = "(= %s)" % full
    fm, nscq = fm_names(version)
    compute = ubuntu_compute_name(version)
    marker = "/usr/share/doc/%s/nvsim-version"
    smi_files = {
        "/usr/bin/nvidia-smi": launcher("simulated nvidia-smi", "nvsim_smi", version,
                                        'sys.argv[1:], "%s"' % version),
        "/usr/bin/nvsim-fault": launcher("simulated GPU faults", "nvsim_fault", version, "sys.argv[1:]"),
        "/usr/lib/python3/dist-packages/nvsim_smi.py": (read(os.path.join(HERE, "nvsim_smi.py")), 0o644),
        "/usr/lib/python3/dist-packages/nvsim_fault.py": (read(os.path.join(HERE, "nvsim_fault.py")), 0o644),
    }
    for target, fixture in CAPTURES.items():
        smi_files["/usr/share/nvsim/" + target] = (read(os.path.join(FIXTURES, fixture)), 0o644)
    specs = [
        package("nvidia-smi", version, "NVIDIA System Management Interface, simulated (%s)" % STANDIN,
                depends=["python3", "libnvidia-ml1 %s" % exact], files=smi_files),
        package("libnvidia-ml1", version, "NVIDIA Management Library placeholder, no library inside (%s)" % STANDIN,
                files={marker % "libnvidia-ml1": (version + "\n", 0o644)}),
        # Ubuntu's server driver carries NVML in libnvidia-compute-<branch>-server (the name the
        # roles read on Ubuntu): the same marker under that name, in place of libnvidia-ml1 (which
        # it provides, so nvidia-smi's dependency holds), one branch at a time.
        package(compute, version, "NVIDIA compute libraries placeholder under Ubuntu's server driver name, "
                "no library inside (%s)" % STANDIN,
                files={marker % compute: (version + "\n", 0o644)},
                extra={"Provides": "libnvidia-ml1 %s, libnvidia-compute" % exact,
                       "Conflicts": "libnvidia-ml1, libnvidia-compute", "Replaces": "libnvidia-ml1, libnvidia-compute"}),
        package("libcuda1", version, "NVIDIA CUDA driver library placeholder, no library inside (%s)" % STANDIN,
                depends=["libnvidia-ml1 %s" % exact],
                files={marker % "libcuda1": (version + "\n", 0o644)}),
        package("nvidia-persistenced", version, "NVIDIA persistence daemon, simulated (%s)" % STANDIN,
                depends=["python3", "systemd"],
                files={"/usr/bin/nvidia-persistenced": daemon_program(version),
                       "/lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT.format(standin=STANDIN),
                                                                           0o644)},
                scripts={"postinst": SYSTEMD_POSTINST.format(standin=STANDIN)}),
        dkms_package("nvidia-open-kernel-dkms", version, True, date, "nvidia-kernel-dkms"),
        dkms_package("nvidia-kernel-dkms", version, False, date, "nvidia-open-kernel-dkms"),
        package(nscq, version, "NVSwitch configuration and query library placeholder (%s)" % STANDIN,
                files={marker % nscq: (version + "\n", 0o644)}),
        package(fm, version, "NVIDIA Fabric Manager, simulated (%s)" % STANDIN,
                depends=["python3", "systemd", "%s %s" % (nscq, exact), "libnvidia-ml1 %s" % exact],
                files={"/usr/bin/nv-fabricmanager": daemon_program(version),
                       "/usr/share/nvidia/nvswitch/fabricmanager.cfg": ("# %s\n" % STANDIN, 0o644),
                       "/lib/systemd/system/nvidia-fabricmanager.service": (FABRICMANAGER_UNIT.format(standin=STANDIN),
                                                                            0o644)},
                scripts={"postinst": SYSTEMD_POSTINST.format(standin=STANDIN)},
                conffiles=["/usr/share/nvidia/nvswitch/fabricmanager.cfg"]),
    ]
    return specs


def control_text(spec):
    fields = [
        ("Package", spec["name"]),
        ("Version", spec["version"]),
        ("Architecture", "amd64"),
        ("Maintainer", MAINTAINER),
        ("Section", "non-free/admin"),
        ("Priority", "optional"),
    ]
    if spec["depends"]:
        fields.append(("Depends", ", ".join(spec["depends"])))
    fields.extend(sorted(spec["extra"].items()))
    fields.append(("Description", spec["description"]))
    return "".join("%s: %s\n" % field for field in fields) + (
        " Part of nvsim, the simulated NVIDIA driver stack of the gpucloud.fleet lab.\n"
        " Never install it on a machine with a real GPU.\n")


def write_tree(root, spec):
    for path, (content, mode) in spec["files"].items():
        target = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(target, mode)
    debian = os.path.join(root, "DEBIAN")
    os.makedirs(debian, exist_ok=True)
    with open(os.path.join(debian, "control"), "w", encoding="utf-8") as handle:
        handle.write(control_text(spec))
    for name, content in spec["scripts"].items():
        with open(os.path.join(debian, name), "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(os.path.join(debian, name), 0o755)
    if spec["conffiles"]:
        with open(os.path.join(debian, "conffiles"), "w", encoding="utf-8") as handle:
            handle.write("".join(path + "\n" for path in spec["conffiles"]))


def run(argv, cwd=None, env=None, stdout=None):
    subprocess.run(argv, cwd=cwd, env=env, stdout=stdout, check=True)


def build_debs(repo, versions=VERSIONS, toolkit_versions=()):
    date = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    built = []
    specs = [spec for version in versions for spec in package_specs(version, date)]
    specs += [spec for version in toolkit_versions for spec in container_toolkit_specs(version)]
    for spec in specs:
        with tempfile.TemporaryDirectory() as tree:
            os.chmod(tree, 0o755)
            write_tree(tree, spec)
            deb = os.path.join(repo, "%s_%s_amd64.deb" % (spec["name"], spec["version"]))
            run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", tree, deb], stdout=subprocess.DEVNULL)
            built.append(deb)
    return built


def index_and_sign(outdir, repo):
    gnupg = os.path.join(outdir, "gnupg")
    os.makedirs(gnupg, mode=0o700, exist_ok=True)
    env = dict(os.environ, GNUPGHOME=gnupg)
    try:
        run(["gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key",
             "gpucloud lab nvsim mirror (throwaway) <nvsim@gpucloud.invalid>", "ed25519", "sign", "never"], env=env)
        with open(os.path.join(repo, "Packages"), "w", encoding="utf-8") as packages:
            run(["apt-ftparchive", "packages", "."], cwd=repo, stdout=packages)
        run(["gzip", "-9nkf", "Packages"], cwd=repo)
        with open(os.path.join(repo, "Release"), "w", encoding="utf-8") as release:
            run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=gpucloud-lab",
                 "-o", "APT::FTPArchive::Release::Label=nvsim (gpucloud lab stand-in, not NVIDIA software)",
                 "release", "."], cwd=repo, stdout=release)
        run(["gpg", "--batch", "--yes", "--clearsign", "-o", "InRelease", "Release"], cwd=repo, env=env)
        run(["gpg", "--batch", "--yes", "-abs", "-o", "Release.gpg", "Release"], cwd=repo, env=env)
        with open(os.path.join(outdir, "key.asc"), "w", encoding="utf-8") as key:
            run(["gpg", "--armor", "--export"], env=env, stdout=key)
        shutil.copy(os.path.join(outdir, "key.asc"), os.path.join(repo, "key.asc"))
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False)


def build(outdir, versions=VERSIONS, toolkit_versions=()):
    missing = [tool for tool in ("dpkg-deb", "apt-ftparchive", "gpg", "gpgconf") if shutil.which(tool) is None]
    if missing:
        raise SystemExit("build-repo: missing %s (apt-get install dpkg apt-utils gpg gpg-agent; "
                         "see requirements/nvsim.deb)" % ", ".join(missing))
    repo = os.path.join(outdir, "repo")
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    os.makedirs(repo)
    debs = build_debs(repo, versions, toolkit_versions)
    index_and_sign(outdir, repo)
    return debs


def parse_args(argv):
    """(OUTDIR, driver versions, toolkit versions) of the command line; None when it is wrong."""
    positional, toolkit, versions = [], [], VERSIONS
    arguments = list(argv)
    while arguments:
        arg = arguments.pop(0)
        if arg == "--container-toolkit" and arguments:
            toolkit.append(arguments.pop(0))
        elif arg == "--no-driver":
            versions = ()
        elif arg.startswith("-"):
            return None
        else:
            positional.append(arg)
    if len(positional) != 1:
        return None
    return os.path.abspath(positional[0]), versions, tuple(toolkit)


def main(argv):
    parsed = parse_args(argv)
    if parsed is None:
        sys.stderr.write("usage: build-repo.sh OUTDIR [--container-toolkit VERSION]... [--no-driver]\n")
        return 2
    outdir, versions, toolkit_versions = parsed
    debs = build(outdir, versions, toolkit_versions)
    sys.stdout.write("built %d packages into %s/repo, signed; key %s/key.asc\n" % (len(debs), outdir, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
