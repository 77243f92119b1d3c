# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Stand-in ``nvidia-ctk`` of the gpucloud lab (gpucloud lab stand-in, not NVIDIA software).

It answers the three calls gpucloud.fleet.container_runtime makes, in the real tool's
shapes (NVIDIA/nvidia-container-toolkit v1.17.8, 5603c4fad80d042f1e5059e3c17acbc209904217):

- ``nvidia-ctk --version``: ``NVIDIA Container Toolkit CLI version <v>`` and a commit line
  (cmd/nvidia-ctk/main.go lines 51-56, internal/info/version.go; urfave/cli's version printer).
- ``nvidia-ctk cdi generate --output=FILE``: a CDI spec of kind ``nvidia.com/gpu`` with one
  device per GPU by index and by UUID (the default ``--device-name-strategy`` index and
  uuid, cmd/nvidia-ctk/cdi/generate/generate.go lines 118-123) and ``all``; YAML or JSON
  from the file name's extension (same file lines 206-213).
- ``nvidia-ctk cdi list``: ``Found N CDI devices`` to stderr, one qualified name a line to
  stdout (cmd/nvidia-ctk/cdi/list/list.go lines 98-100).

What it describes comes from the lab, not from NVML: the GPUs of the nvsim profile in
/etc/nvsim/profile (8 for ``h200-hgx8`` and ``a100-sxm8``, UUIDs as the simulated
nvidia-smi makes them), and the driver version of the loaded module
(/proc/driver/nvidia/version). A container cannot load a module, so there it takes the
version of the installed nvsim NVML package instead (``libnvidia-ml1``, Debian's name, or
``libnvidia-compute-<branch>-server``, Ubuntu's): the real tool would fail there
("failed to initialize NVML"), which this one does only when neither exists.
"""

import glob
import json
import os
import re
import sys
import uuid

VERSION = "0.0.0"
COMMIT = "gpucloud-lab-stand-in"
STANDIN = "gpucloud lab stand-in, not NVIDIA software"
KIND = "nvidia.com/gpu"
CDI_VERSION = "0.5.0"
# As scripts/nvsim/nvsim_smi.py (tests/unit/scripts/test_nvsim_ctk.py checks they agree).
NVSIM_NAMESPACE = uuid.UUID("6f1d2c1e-8f4b-5c55-9a39-6e7673696d00")
PROFILE_GPUS = {"h200-hgx8": 8, "a100-sxm8": 8}
PROC_VERSION = re.compile(r"NVRM version:.*?\s([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\s")
PATHS = {
    "proc": "/proc/driver/nvidia/version",
    "marker": "/usr/share/doc/libnvidia-ml1/nvsim-version",
    "ubuntu_markers": "/usr/share/doc/libnvidia-compute-*/nvsim-version",
    "profile": "/etc/nvsim/profile",
    "spec_dirs": ("/etc/cdi", "/var/run/cdi"),
}


class CtkError(Exception):
    """A failure the real tool would report, with its exit status 1."""


def gpu_uuid(profile, index):
    return "GPU-%s" % uuid.uuid5(NVSIM_NAMESPACE, "%s/%d" % (profile, index))


def driver_version(proc_text, marker_text):
    """The loaded module's version, else the installed nvsim userspace's; CtkError without either."""
    if proc_text:
        match = PROC_VERSION.search(proc_text)
        if match:
            return match.group(1)
    if marker_text and marker_text.strip():
        return marker_text.strip()
    raise CtkError("failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND (no NVIDIA driver: "
                   "no /proc/driver/nvidia/version and no nvsim libnvidia-ml1 or libnvidia-compute-*)")


def userspace_marker(paths):
    """The installed nvsim NVML package's version marker: Debian's name, else Ubuntu's (one branch
    is installed at a time: the stand-ins conflict), else None."""
    text = read(paths["marker"])
    if text is None and paths.get("ubuntu_markers"):
        for path in sorted(glob.glob(paths["ubuntu_markers"])):
            text = read(path)
            break
    return text


def build_spec(profile, driver):
    """The CDI spec for PROFILE's GPUs on DRIVER (pure)."""
    count = PROFILE_GPUS.get(profile or "")
    if not count:
        raise CtkError("failed to create CDI spec: no NVIDIA GPUs found (nvsim profile %r)" % (profile,))
    libcuda = "/usr/lib/x86_64-linux-gnu/libcuda.so.%s" % driver
    devices = []
    for index in range(count):
        # Separate dicts for the two names: the YAML then holds no anchors and aliases.
        for name in (str(index), gpu_uuid(profile, index)):
            devices.append({"name": name, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia%d" % index}]}})
    devices.append({"name": "all",
                    "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia%d" % i} for i in range(count)]}})
    return {
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"},
                            {"path": "/dev/nvidia-uvm-tools"}],
            "mounts": [{"hostPath": libcuda, "containerPath": libcuda, "options": ["ro", "nosuid", "nodev", "bind"]}],
        },
    }


def render(spec, path):
    if path.endswith(".json"):
        return json.dumps(spec, indent=2) + "\n"
    import yaml  # python3-yaml, a Depends of the stand-in package

    return "---\n" + yaml.safe_dump(spec, default_flow_style=False, sort_keys=False)


def device_names(specs):
    names = []
    for spec in specs:
        names.extend("%s=%s" % (spec["kind"], device["name"]) for device in spec.get("devices", []))
    return names


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def load_specs(spec_dirs):
    import yaml

    specs = []
    for directory in spec_dirs:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith((".yaml", ".json")):
                with open(os.path.join(directory, name), encoding="utf-8") as handle:
                    specs.append(yaml.safe_load(handle))
    return specs


def option(argv, name):
    for index, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
    return None


def main(argv, paths=None, out=sys.stdout, err=sys.stderr):
    paths = paths or PATHS
    if argv[:1] in (["--version"], ["-v"]):
        out.write("NVIDIA Container Toolkit CLI version %s\ncommit: %s\n" % (VERSION, COMMIT))
        return 0
    try:
        if argv[:2] == ["cdi", "generate"]:
            output = option(argv[2:], "--output") or ""
            profile = (read(paths["profile"]) or "").strip()
            spec = build_spec(profile, driver_version(read(paths["proc"]), userspace_marker(paths)))
            text = render(spec, output or "stdout.yaml")
            if not output:
                out.write(text)
                return 0
            os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
            temporary = output + ".tmp"
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, output)
            err.write('level=info msg="Generated CDI spec with version %s" (%s)\n' % (CDI_VERSION, STANDIN))
            return 0
        if argv[:2] == ["cdi", "list"]:
            names = device_names(load_specs(paths["spec_dirs"]))
            err.write('level=info msg="Found %d CDI devices"\n' % len(names))
            out.write("".join(name + "\n" for name in names))
            return 0
    except CtkError as exc:
        err.write('level=error msg="%s"\n' % exc)
        return 1
    err.write("nvidia-ctk (%s): only --version, cdi generate and cdi list are simulated; got %r\n"
              % (STANDIN, argv))
    return 2
