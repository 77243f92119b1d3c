# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Decisions of gpucloud.fleet.container_runtime around the NVIDIA Container Toolkit.

Pure functions; bad input raises ``ValueError`` naming it. Nothing here touches a module
or the file system.

- ``toolkit_packages``: the four packages of NVIDIA's install guide, pinned.
  NVIDIA/cloud-native-docs, container-toolkit/install-guide.md (commit
  01f0197c90e918c65883c6c2cb5d9cc3653ebde7, "Installing the NVIDIA Container Toolkit"):
  apt installs ``nvidia-container-toolkit``, ``nvidia-container-toolkit-base``,
  ``libnvidia-container-tools`` and ``libnvidia-container1`` each as ``=${version}-1``;
  dnf and zypper as ``-${version}-1``.
- ``plan_docker_daemon``: what ``nvidia-ctk runtime configure --runtime=docker`` does to
  ``/etc/docker/daemon.json``. NVIDIA/nvidia-container-toolkit v1.17.8
  (5603c4fad80d042f1e5059e3c17acbc209904217), pkg/config/engine/docker/docker.go lines
  68-93 (``AddRuntime``): ``runtimes.<name> = {"path": PATH, "args": []}`` (the whole
  entry), and
  ``default-runtime = <name>`` only with ``--set-as-default``; every other key stays.
  The file is written with four-space indentation (``Save``, same file lines 153-165,
  ``json.MarshalIndent(config, "", "    ")``). We differ in keeping the order of the keys
  and in not rewriting a file that already says all of that.
- ``loaded_driver_version`` / ``package_upstream_version`` / ``gpu_layout`` / ``cdi_plan``:
  whether ``/etc/cdi/nvidia.yaml`` must be (re)generated, from the driver version and the
  GPU/MIG layout (``nvidia-smi -L``) it was made for. ``nvidia-ctk cdi generate`` lists
  the MIG devices present when it runs; a new MIG layout makes new devices (new UUIDs,
  other /dev/nvidia-caps nodes), so a spec from before it names devices that are gone.
- ``validate_cdi_spec``: the checks the CDI library makes before a runtime uses a spec.
  cncf-tags/container-device-interface (05ae4b5bb730a036cb3f79477bd6676eea4a8c83):
  schema/schema.json lines 43-47 (cdiVersion, kind, devices required) and 33-36 (each
  device: name and containerEdits), specs-go/version.go lines 28-38 (known versions),
  pkg/parser/parser.go lines 145-199 (vendor, class and device name characters),
  pkg/cdi/spec.go lines 236-251 (unique names, at least one device) and pkg/cdi/device.go
  lines 68-83 with container-edits.go ``isEmpty`` (a device must edit something).
"""


import hashlib
import json
import re

TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
# Whole-string patterns, used with fullmatch: a trailing newline is not a version.
_TOOLKIT_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(~rc\.[0-9]+)?")
_REVISION = re.compile(r"[0-9A-Za-z.+~]+")
# /proc/driver/nvidia/version, both module flavours (the regex gpucloud.fleet.nvidia_driver reads it with).
_PROC_VERSION = re.compile(r"NVRM version:.*?\s([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\s")
_DRIVER_VERSION = re.compile(r"[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?")
_PACKAGE_UPSTREAM = re.compile(r"(?:[0-9]+:)?([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)(?:[-+~][0-9A-Za-z.+~:-]*)?")
# nvidia-smi -L: "GPU 0: NVIDIA H200 (UUID: GPU-...)" and, under a GPU in MIG mode,
# "  MIG 3g.71gb     Device  0: (UUID: MIG-...)" (drivers before R470: MIG-GPU-<uuid>/<gi>/<ci>).
_SMI_GPU = re.compile(r"GPU ([0-9]+): (.*) \(UUID: (GPU-[0-9A-Za-z-]+)\)")
_SMI_MIG = re.compile(r"\s+MIG (\S+)\s+Device\s+([0-9]+): \(UUID: (MIG-[0-9A-Za-z/-]+)\)")

CDI_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
_EDIT_KEYS = ("env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGids")


def toolkit_packages(version, pkg_mgr, revision="1"):
    """The four toolkit packages pinned to VERSION-REVISION for apt (``=``) or dnf (``-``)."""
    if not isinstance(version, str) or not _TOOLKIT_VERSION.fullmatch(version):
        raise ValueError("container toolkit version %r is not a release such as 1.17.8" % (version,))
    if not isinstance(revision, str) or not _REVISION.fullmatch(revision):
        raise ValueError("package revision %r is not a Debian/RPM revision such as 1" % (revision,))
    separator = {"apt": "=", "dnf": "-"}.get(pkg_mgr)
    if separator is None:
        raise ValueError("package manager %r: only apt and dnf are known" % (pkg_mgr,))
    return ["%s%s%s-%s" % (name, separator, version, revision) for name in TOOLKIT_PACKAGES]


def loaded_driver_version(proc_text):
    """The kernel module version in /proc/driver/nvidia/version, or None when none is loaded."""
    if not proc_text:
        return None
    match = _PROC_VERSION.search(proc_text)
    if not match:
        raise ValueError("/proc/driver/nvidia/version has no 'NVRM version' line with a driver version: %r"
                         % proc_text[:200])
    return match.group(1)


def package_upstream_version(package_version):
    """580.95.05 of a driver package version such as 580.95.05-0ubuntu1 or 1:580.95.05-1; None for none."""
    if not package_version:
        return None
    match = _PACKAGE_UPSTREAM.fullmatch(package_version.strip())
    if not match:
        raise ValueError("driver package version %r does not start with a driver version such as 580.95.05"
                         % (package_version,))
    return match.group(1)


def gpu_layout(smi_list_text):
    """The GPU/MIG layout in ``nvidia-smi -L``'s output: {fingerprint, gpus, mig_devices}; None for no output.

    The fingerprint covers every GPU's index and UUID and every MIG device's parent,
    index, profile and UUID, so any change of MIG mode or layout (MIG UUIDs are new for
    each new instance) changes it.
    """
    if not smi_list_text or not smi_list_text.strip():
        return None
    canonical = []
    gpus = migs = 0
    parent = None
    for number, line in enumerate(smi_list_text.splitlines(), 1):
        if not line.strip():
            continue
        gpu = _SMI_GPU.fullmatch(line.rstrip())
        mig = _SMI_MIG.fullmatch(line.rstrip())
        if gpu:
            gpus += 1
            parent = gpu.group(1)
            canonical.append("GPU %s %s" % (parent, gpu.group(3)))
        elif mig and parent is not None:
            migs += 1
            canonical.append("MIG %s:%s %s %s" % (parent, mig.group(2), mig.group(1), mig.group(3)))
        else:
            raise ValueError("nvidia-smi -L line %d is neither a GPU nor a MIG device under one: %r"
                             % (number, line[:200]))
    digest = hashlib.sha256("\n".join(canonical).encode("utf-8")).hexdigest()
    return {"fingerprint": "sha256:" + digest, "gpus": gpus, "mig_devices": migs}


def parse_cdi_record(text):
    """(driver, layout fingerprint) of the record written beside the spec; (\"\", None) when empty.

    Line 1 is the driver version; a ``layout sha256:...`` line follows since the layout is
    recorded too (records written before have none: layout None).
    """
    driver, layout = "", None
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("layout "):
            layout = line[len("layout "):].strip() or None
        elif line and not driver:
            driver = line
    return driver, layout


def cdi_record(driver, layout):
    """The record's text for a spec generated for DRIVER and LAYOUT (gpu_layout's result or None)."""
    return "%s\n%s" % (driver, "layout %s\n" % layout["fingerprint"] if layout else "")


def cdi_plan(loaded, installed, recorded, spec_exists, spec_errors=(), reboot_required=False, layout=None,
             recorded_layout=None):
    """Whether to (re)generate the CDI spec, for which driver, and why.

    loaded: the loaded module's version (None without one); installed: the driver
    package's upstream version (None without one); recorded: the driver version the
    current spec was generated for ("" or None when unknown); spec_exists: whether the
    spec file exists; spec_errors: what validate_cdi_spec found wrong with it;
    reboot_required: gpucloud_reboot_required (a new driver waits for the reboot);
    layout: gpu_layout() of the node now (None when nvidia-smi gave nothing: not judged);
    recorded_layout: the layout fingerprint recorded with the spec (None when unknown).

    Returns {action: generate|keep|skip, driver, reason}.
    """
    for name, value in (("loaded", loaded), ("installed", installed)):
        if value is not None and not _DRIVER_VERSION.fullmatch(str(value)):
            raise ValueError("%s driver version %r is not a version such as 580.95.05" % (name, value))
    if reboot_required:
        return {"action": "skip", "driver": loaded or installed,
                "reason": "a reboot is pending (gpucloud_reboot_required): the driver loaded after it is "
                          "the one the CDI spec must describe; the next run after the reboot generates it"}
    driver = loaded or installed
    if driver is None:
        return {"action": "skip", "driver": None,
                "reason": "no NVIDIA driver is loaded or installed, so nvidia-ctk has nothing to describe"}
    if loaded is None:
        origin = "installed driver package (no module loaded)"
    else:
        origin = "loaded kernel module"
    if not spec_exists:
        return {"action": "generate", "driver": driver, "reason": "no CDI spec yet; driver %s from the %s"
                % (driver, origin)}
    if spec_errors:
        return {"action": "generate", "driver": driver, "reason": "the CDI spec is not valid (%s)"
                % "; ".join(spec_errors)}
    if not recorded:
        return {"action": "generate", "driver": driver,
                "reason": "the CDI spec does not say which driver it was made for"}
    if recorded != driver:
        return {"action": "generate", "driver": driver, "reason": "the CDI spec was made for driver %s, the %s is %s"
                % (recorded, origin, driver)}
    if layout is not None and recorded_layout != layout["fingerprint"]:
        now = "%d GPU(s) and %d MIG device(s) now" % (layout["gpus"], layout["mig_devices"])
        if recorded_layout is None:
            return {"action": "generate", "driver": driver,
                    "reason": "the CDI spec does not say which GPU/MIG layout it describes (%s)" % now}
        return {"action": "generate", "driver": driver,
                "reason": "the GPU/MIG layout changed since the CDI spec was made (%s)" % now}
    return {"action": "keep", "driver": driver, "reason": "the CDI spec was made for driver %s, the %s" % (driver, origin)}


def _name_ok(name, allowed_inner, first_letter):
    if not isinstance(name, str) or not name:
        return False
    first_ok = name[0].isascii() and (name[0].isalpha() if first_letter else name[0].isalnum())
    if not first_ok:
        return False
    if len(name) == 1:
        return True
    inner = all(char.isascii() and (char.isalnum() or char in allowed_inner) for char in name[1:-1])
    return inner and name[-1].isascii() and name[-1].isalnum()


def _edits_empty(edits):
    return not any(edits.get(key) for key in _EDIT_KEYS)


def validate_cdi_spec(spec, kind=None):
    """The list of reasons the CDI spec (parsed YAML/JSON) is not usable; empty when it is."""
    if not isinstance(spec, dict):
        return ["the spec is not a mapping"]
    errors = []
    for key in ("cdiVersion", "kind", "devices"):
        if key not in spec:
            errors.append("%s is missing" % key)
    version = spec.get("cdiVersion")
    if "cdiVersion" in spec and version not in CDI_VERSIONS:
        errors.append("cdiVersion %r is not a CDI version (%s)" % (version, ", ".join(CDI_VERSIONS)))
    spec_kind = spec.get("kind")
    if "kind" in spec:
        vendor, _sep, klass = str(spec_kind).partition("/")
        if not (_name_ok(vendor, "_-.", True) and _name_ok(klass, "_-.", True)):
            errors.append("kind %r is not VENDOR/CLASS" % (spec_kind,))
        elif kind is not None and spec_kind != kind:
            errors.append("kind is %r, not %r" % (spec_kind, kind))
    devices = spec.get("devices")
    if "devices" in spec:
        if not isinstance(devices, list) or not devices:
            errors.append("devices is empty (the spec describes no device)")
        else:
            seen = set()
            for number, device in enumerate(devices):
                if not isinstance(device, dict):
                    errors.append("devices[%d] is not a mapping" % number)
                    continue
                name = device.get("name")
                if not _name_ok(name, "_-.:", False):
                    errors.append("devices[%d]: name %r is not a CDI device name" % (number, name))
                elif name in seen:
                    errors.append("devices[%d]: name %r appears twice" % (number, name))
                seen.add(name)
                edits = device.get("containerEdits")
                if not isinstance(edits, dict) or _edits_empty(edits):
                    errors.append("devices[%d] (%s): containerEdits is missing or edits nothing" % (number, name))
    common = spec.get("containerEdits")
    if common is not None and not isinstance(common, dict):
        errors.append("containerEdits is not a mapping")
    return errors


def cdi_device_names(spec):
    """The qualified names a runtime accepts for the spec's devices (nvidia.com/gpu=0, ...)."""
    return ["%s=%s" % (spec["kind"], device["name"]) for device in spec.get("devices", [])]


def plan_docker_daemon(current_text, runtime_path, set_as_default=False, name="nvidia"):
    """Plan /etc/docker/daemon.json with the nvidia runtime; returns {text, changed, summary, config}.

    current_text: the file's text (None or blank: no file). Other keys and their order are
    kept; only runtimes.<name> (and default-runtime with set_as_default) are written.
    """
    if not isinstance(runtime_path, str) or not runtime_path.startswith("/"):
        raise ValueError("runtime_path must be an absolute path, got %r" % (runtime_path,))
    if not isinstance(set_as_default, bool):
        raise ValueError("set_as_default must be true or false, got %r" % (set_as_default,))
    original = current_text or ""
    if original.strip():
        try:
            config = json.loads(original)
        except RecursionError:
            raise ValueError("daemon.json nests objects or arrays too deeply to be read; dockerd would refuse "
                             "it too") from None
        except ValueError as exc:
            raise ValueError("daemon.json is not valid JSON (%s); dockerd would not start with it either" % exc) from exc
        if not isinstance(config, dict):
            raise ValueError("daemon.json must hold a JSON object, it holds %s" % type(config).__name__)
    else:
        config = {}
    summary = []
    runtimes = config.get("runtimes", {})
    if not isinstance(runtimes, dict):
        raise ValueError("daemon.json: runtimes must be an object, got %s" % type(runtimes).__name__)
    wanted = {"path": runtime_path, "args": []}
    current = runtimes.get(name)
    if current != wanted:
        # The whole entry is replaced, as AddRuntime does: a leftover runtimeType or
        # options beside path would make dockerd refuse the runtime.
        runtimes = dict(runtimes)
        runtimes[name] = wanted
        config["runtimes"] = runtimes
        summary.append("%s runtime %s (path %s)" % ("replaced" if current is not None else "added", name,
                                                    json.dumps(runtime_path)))
    if set_as_default and config.get("default-runtime") != name:
        summary.append("default-runtime: %s -> %s" % (json.dumps(config.get("default-runtime")), json.dumps(name)))
        config["default-runtime"] = name
    if not summary:
        return {"text": original, "changed": False, "summary": [], "config": config}
    text = json.dumps(config, indent=4) + "\n"
    return {"text": text, "changed": text != original, "summary": summary, "config": config}
