# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Stand-in nvidia-persistenced and nv-fabricmanager (gpucloud lab stand-in, not NVIDIA software).

build_repo.py installs this file as /usr/bin/nvidia-persistenced and
/usr/bin/nv-fabricmanager with VERSION set; the program name picks the daemon.
Both run in the foreground (Type=simple units) and write the PID file the real
daemons write, which the simulated nvidia-smi reads.
"""

import os
import re
import signal
import socket
import sys
import time

VERSION = "0.0.0"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_VERSION_RE = re.compile(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9.]+)")
PERSISTENCED_PID = "/run/nvidia-persistenced/nvidia-persistenced.pid"
PERSISTENCED_MODE = "/run/nvsim/persistenced-mode"
OVERRIDES_FILE = "/run/nvsim/persistence.json"
FABRICMANAGER_PID = "/run/nvidia-fabricmanager/nv-fabricmanager.pid"
FABRICMANAGER_LOG = "/var/log/fabricmanager.log"


def loaded_version(proc_text):
    match = PROC_VERSION_RE.search(proc_text or "")
    return match.group(1) if match else None


def fabricmanager_check(fm_version, proc_text):
    """(ok, message): Fabric Manager starts only on a loaded driver of its own version."""
    loaded = loaded_version(proc_text)
    if loaded is None:
        return False, ("fabric manager NVIDIA GPU driver interface version %s don't match with driver version "
                       "(none: no NVIDIA kernel module is loaded). Please update with matching NVIDIA driver package."
                       % fm_version)
    if loaded != fm_version:
        return False, ("fabric manager NVIDIA GPU driver interface version %s don't match with driver version %s. "
                       "Please update with matching NVIDIA driver package." % (fm_version, loaded))
    return True, "Successfully configured all the available NVSwitches to route GPU NVLink traffic."


def persistenced_check(argv, proc_text):
    """(ok, persistence, message) for the nvidia-persistenced command line ARGV."""
    if loaded_version(proc_text) is None:
        return False, False, "nvidia-persistenced failed to initialize. Check syslog for more details."
    persistence = "--no-persistence-mode" not in argv
    return True, persistence, "Started (%d)" % os.getpid()


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _remove(*paths):
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


def _notify_ready():
    """Tell systemd (Type=notify) that start-up worked, so a failed start fails `systemctl start`."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.sendto(b"READY=1", address)


def _serve(pid_file, extra_files):
    """Write the PID file, sleep until SIGTERM, then clean up."""
    _write(pid_file, "%d\n" % os.getpid())
    _notify_ready()

    def stop(_signum, _frame):
        _remove(pid_file, *extra_files)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        time.sleep(3600)


def persistenced(argv):
    ok, persistence, message = persistenced_check(argv, _read(PROC_VERSION))
    sys.stderr.write("nvidia-persistenced: %s\n" % message)
    if not ok:
        return 1
    # A fresh daemon decides persistence for every GPU; `nvidia-smi -pm` overrides start over.
    _remove(OVERRIDES_FILE)
    _write(PERSISTENCED_MODE, "persistence\n" if persistence else "no-persistence\n")
    sys.stderr.write("nvidia-persistenced: Persistence mode is %s for all devices.\n"
                     % ("enabled" if persistence else "disabled"))
    _serve(PERSISTENCED_PID, [PERSISTENCED_MODE, OVERRIDES_FILE])
    return 0


def fabricmanager(_argv):
    ok, message = fabricmanager_check(VERSION, _read(PROC_VERSION))
    line = "[%s] [%s] [tid %d] %s\n" % (
        time.strftime("%b %d %Y %H:%M:%S"), "INFO" if ok else "ERROR", os.getpid(), message)
    try:
        with open(FABRICMANAGER_LOG, "a", encoding="utf-8") as handle:
            handle.write(line)
    except OSError:
        pass
    sys.stderr.write(message + "\n")
    if not ok:
        return 1
    _serve(FABRICMANAGER_PID, [])
    return 0


def main(argv):
    name = os.path.basename(argv[0])
    if name == "nv-fabricmanager":
        return fabricmanager(argv[1:])
    return persistenced(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
