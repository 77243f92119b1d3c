# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Build the NVIDIA k8s-device-plugin config file from a node's hardware profile.

Pure functions: a hardware-profile dict (``gpucloud_profile``) and deployment flags go in,
the config (``version: v1``) comes out as plain data or as YAML text; a profile the plugin
would refuse, or would silently read differently, raises ``ValueError`` naming the
profile and the key. Only the standard library is used.

The schema and the rules come from github.com/NVIDIA/k8s-device-plugin at v0.20.0
(commit 1b826acc6af3079d8923bac395c3124b8861a9a6):

- api/config/v1/config.go lines 34-40: ``version``, ``flags``, ``resources``,
  ``sharing``, ``imex``; lines 128-134: ``version`` must be ``v1``; lines 72-76: with
  MPS, ``failRequestsGreaterThanOne`` defaults to true.
- api/config/v1/flags.go lines 59-83: the flags and their JSON names; the plugin-only
  ones live under ``flags.plugin``.
- api/config/v1/sharing.go lines 20-25 and 36-45: ``sharing.timeSlicing`` and
  ``sharing.mps``. The plugin does not refuse a config holding both; MPS then wins
  silently. A profile names one ``sharing.mode``, so we never write both.
- api/config/v1/replicas.go lines 30-34 (renameByDefault, failRequestsGreaterThanOne,
  resources), 200-202 (at least one resource), 251-253 (replicas >= 2). ``rename`` and
  ``devices`` are ignored by the plugin with a warning (config.go lines 81-95,
  replicas.go lines 36-66), so we never write them.
- api/config/v1/resources.go lines 48-64 and consts.go lines 24-28: resource names are
  ``nvidia.com/<name>``, at most 63 characters, the name a DNS subdomain.
- cmd/nvidia-device-plugin/main.go lines 203-257 (validateFlags): MIG strategy
  none/single/mixed (244-250); MPS with ``mixed`` refused (227-230); device list,
  device ID, allocation policy and discovery strategies (204-242).
- internal/plugin/mps.go lines 45-49: MPS on MIG devices fails ("sharing using MPS is not
  supported for MIG devices"): with the ``single`` strategy every device is a MIG device.
- cmd/mps-control-daemon/mps/device.go lines 35-49: at most 48 MPS clients per GPU of
  compute capability 7.5 or newer, 16 before. Profiles do not name a compute capability,
  so we enforce 48 and leave 16 to the plugin.
- Time-slicing has no upper bound upstream; we allow at most MAX_TIME_SLICING_REPLICAS (256)
  per GPU: the plugin advertises replicas x GPUs devices to kubelet, and no node runs more
  pods than that (kubelet's --max-pods defaults to 110; 256 is the largest default of the
  managed offerings). More is a typo (10**12 makes a ListAndWatch answer of 8 * 10**12 IDs).
- internal/rm/rm.go lines 109-148: with ``single``, MIG devices are ``nvidia.com/gpu``;
  with ``mixed``, each MIG profile whose compute and GPU slice counts are equal becomes
  ``nvidia.com/mig-<profile>`` with ``+`` replaced by ``.``; the profile format is
  go-nvlib v0.12.0 pkg/nvlib/device/mig_profile.go lines 170-182.
"""


import json
import math
import os
import re

import yaml

CONFIG_VERSION = "v1"
RESOURCE_PREFIX = "nvidia.com/"
MAX_RESOURCE_NAME_LENGTH = 63
GPU_RESOURCE = RESOURCE_PREFIX + "gpu"
MIG_STRATEGIES = ("none", "single", "mixed")
SHARING_MODES = ("none", "time-slicing", "mps")
MIN_REPLICAS = 2
MAX_MPS_REPLICAS = 48
MAX_TIME_SLICING_REPLICAS = 256
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "roles",
                           "k8s_gpu_node", "files", "schemas", "device-plugin-config-v1.schema.json")
MIG_KEYS = ("strategy", "layout", "profiles")
SHARING_KEYS = ("mode", "replicas", "rename_by_default", "fail_requests_greater_than_one")

# Deployment flags: our name -> (config key, kind, allowed values or None, under flags.plugin).
# Kind "path": an absolute path of the node's file system.
FLAGS = {
    "fail_on_init_error": ("failOnInitError", bool, None, False),
    "nvidia_driver_root": ("nvidiaDriverRoot", "path", None, False),
    "nvidia_dev_root": ("nvidiaDevRoot", "path", None, False),
    "mps_root": ("mpsRoot", "path", None, False),
    "gdrcopy_enabled": ("gdrcopyEnabled", bool, None, False),
    "gds_enabled": ("gdsEnabled", bool, None, False),
    "mofed_enabled": ("mofedEnabled", bool, None, False),
    "device_discovery_strategy": ("deviceDiscoveryStrategy", str, ("auto", "nvml", "tegra"), False),
    "pass_device_specs": ("passDeviceSpecs", bool, None, True),
    "device_list_strategy": ("deviceListStrategy", list,
                             ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri"), True),
    "device_id_strategy": ("deviceIDStrategy", str, ("uuid", "index"), True),
    "shared_devices_allocation_policy": ("sharedDevicesAllocationPolicy", str, ("distributed", "packed"), True),
}

# Every pattern here is matched with fullmatch: "$" would let a trailing newline through.
# <C>c.<G>g.<GB>gb, then +me / +me.all / +gfx or -me (go-nvlib mig_profile.go lines 29-34, 170-182).
_MIG_PROFILE = re.compile(r"(?:(?P<c>[1-9][0-9]*)c\.)?(?P<g>[1-9][0-9]*)g\.(?P<gb>[1-9][0-9]*)gb"
                          r"(?:\+(?:me|me\.all|gfx)|-me)?")
_MIG_LAYOUT_ALL = re.compile(r"all-(?P<profile>.+)", re.S)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# YAML 1.1 (go-yaml v2, under sigs.k8s.io/yaml) reads these plain scalars as booleans or null.
_YAML_SPECIAL = frozenset(("y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", ""))
_YAML_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9._/-]*")
# An absolute path: no control characters, no empty, '.' or '..' component.
_ABSOLUTE_PATH = re.compile(r"/|(/(?!\.\.?(?:/|\Z))[^/\x00-\x1f\x7f]+)+")


def _label(profile):
    name = profile.get("name") if isinstance(profile, dict) else None
    return "profile %s" % name if isinstance(name, str) and name else "profile"


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def mig_resource_name(mig_profile):
    """The resource the plugin's ``mixed`` strategy advertises for a MIG profile (rm.go line 145)."""
    if not isinstance(mig_profile, str):
        raise ValueError("MIG profile must be a string such as 1g.10gb, got %r" % (mig_profile,))
    match = _MIG_PROFILE.fullmatch(mig_profile)
    if not match:
        raise ValueError("MIG profile %r is not of the form <G>g.<GB>gb (e.g. 1g.10gb, 3g.71gb, 1g.10gb+me)"
                         % mig_profile)
    if match.group("c") and match.group("c") != match.group("g"):
        raise ValueError("MIG profile %r is a compute-instance profile (%sc of %sg): the device plugin "
                         "advertises only profiles whose compute and GPU slices are equal"
                         % (mig_profile, match.group("c"), match.group("g")))
    name = RESOURCE_PREFIX + "mig-" + mig_profile.split("c.", 1)[-1].replace("+", ".")
    _check_resource_name(name)
    return name


def _check_resource_name(name):
    if len(name) > MAX_RESOURCE_NAME_LENGTH:
        raise ValueError("resource name %s is longer than %d characters" % (name, MAX_RESOURCE_NAME_LENGTH))
    if not _DNS_SUBDOMAIN.fullmatch(name[len(RESOURCE_PREFIX):]):
        raise ValueError("resource name %s is not a DNS subdomain after %s" % (name, RESOURCE_PREFIX))


def _strict_keys(value, allowed, where):
    unknown = sorted(str(key) for key in value if key not in allowed)
    if unknown:
        raise ValueError("%s has unknown key(s) %s; allowed: %s" % (where, ", ".join(unknown), ", ".join(allowed)))


def _mig(profile, label):
    """(strategy, MIG profiles or None) from the profile's mig key."""
    mig = profile.get("mig", False)
    if mig is None or mig is False:
        return "none", None
    if mig is True:
        raise ValueError("%s: mig: true says MIG mode is on but not how the device plugin exposes it; "
                         "write mig: {strategy: single|mixed, layout: ...}" % label)
    if not isinstance(mig, dict):
        raise ValueError("%s: mig must be false or a mapping with strategy, got %r" % (label, mig))
    _strict_keys(mig, MIG_KEYS, "%s: mig" % label)
    strategy = mig.get("strategy")
    if strategy not in MIG_STRATEGIES:
        raise ValueError("%s: mig.strategy must be one of %s, got %r" % (label, ", ".join(MIG_STRATEGIES), strategy))
    layout = mig.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise ValueError("%s: mig.layout must be a mig-parted config name such as all-1g.10gb, got %r"
                         % (label, layout))
    profiles = mig.get("profiles")
    if strategy == "none" and (layout is not None or profiles is not None):
        # The mig role would partition the GPUs while the plugin advertises whole GPUs it cannot hand out.
        raise ValueError("%s: mig.strategy none with mig.%s %s: the GPUs would be partitioned and the device "
                         "plugin would advertise none of the slices; use strategy single or mixed, or mig: false"
                         % (label, "layout" if layout is not None else "profiles",
                            layout if layout is not None else profiles))
    if profiles is not None:
        if not isinstance(profiles, list) or not profiles:
            raise ValueError("%s: mig.profiles must be a non-empty list such as [1g.10gb], got %r" % (label, profiles))
    else:
        match = _MIG_LAYOUT_ALL.fullmatch(layout or "")
        if match and _MIG_PROFILE.fullmatch(match.group("profile")):
            profiles = [match.group("profile")]
    return strategy, profiles


def _replicated(sharing, label, mode, resources):
    replicas = sharing.get("replicas")
    if not _is_int(replicas):
        raise ValueError("%s: sharing.replicas must be an integer, got %r" % (label, replicas))
    if replicas < MIN_REPLICAS:
        raise ValueError("%s: sharing.replicas must be at least %d (the device plugin refuses fewer), got %d"
                         % (label, MIN_REPLICAS, replicas))
    if mode == "mps" and replicas > MAX_MPS_REPLICAS:
        raise ValueError("%s: sharing.replicas %d is more than the %d MPS clients a GPU serves"
                         % (label, replicas, MAX_MPS_REPLICAS))
    if replicas > MAX_TIME_SLICING_REPLICAS:
        raise ValueError("%s: sharing.replicas %d is more than the %d time-slicing replicas per GPU allowed "
                         "(more than the pods a node runs)" % (label, replicas, MAX_TIME_SLICING_REPLICAS))
    block = {}
    for key, config_key in (("rename_by_default", "renameByDefault"),
                            ("fail_requests_greater_than_one", "failRequestsGreaterThanOne")):
        value = sharing.get(key)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise ValueError("%s: sharing.%s must be true or false, got %r" % (label, key, value))
        # renameByDefault is omitempty upstream: false is the same as leaving it out.
        if config_key == "renameByDefault" and not value:
            continue
        block[config_key] = value
    block["resources"] = [{"name": name, "replicas": replicas} for name in resources]
    return block


def _flags(flags):
    if flags is None:
        return {}, {}
    if not isinstance(flags, dict):
        raise ValueError("flags must be a mapping, got %r" % (flags,))
    _strict_keys(flags, tuple(FLAGS), "flags")
    common, plugin = {}, {}
    for key, (config_key, kind, allowed, plugin_only) in FLAGS.items():
        if key not in flags or flags[key] is None:
            continue
        value = flags[key]
        if kind is list:
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not values or not all(isinstance(item, str) for item in values):
                raise ValueError("flags.%s must be a string or a list of strings, got %r" % (key, value))
            bad = [item for item in values if item not in allowed]
            if bad:
                raise ValueError("flags.%s: %s not one of %s" % (key, ", ".join(bad), ", ".join(allowed)))
            twice = sorted(set(item for item in values if values.count(item) > 1))
            if twice:
                raise ValueError("flags.%s names %s twice: each strategy once" % (key, ", ".join(twice)))
            value = values[0] if len(values) == 1 else list(values)
        elif kind == "path":
            if not isinstance(value, str) or not _ABSOLUTE_PATH.fullmatch(value):
                raise ValueError("flags.%s must be an absolute path (no '.', '..' or empty component, no control "
                                 "character), got %r" % (key, value))
        elif not isinstance(value, kind):
            raise ValueError("flags.%s must be a %s, got %r" % (key, "boolean" if kind is bool else "string", value))
        elif allowed is not None and value not in allowed:
            raise ValueError("flags.%s must be one of %s, got %r" % (key, ", ".join(allowed), value))
        (plugin if plugin_only else common)[config_key] = value
    return common, plugin


def build_device_plugin_config(profile, flags=None):
    """The device plugin config (``version: v1``) for a hardware profile, as plain data.

    profile: the node's hardware profile (gpucloud_profile); read are ``name`` (for
    messages), ``mig`` (false, or {strategy: none|single|mixed, layout, profiles}) and
    ``sharing`` ({mode: none|time-slicing|mps, replicas, rename_by_default,
    fail_requests_greater_than_one}); other keys are the profile's business.
    flags: deployment flags (see FLAGS), written under ``flags`` / ``flags.plugin``.
    """
    if not isinstance(profile, dict):
        raise ValueError("the hardware profile must be a mapping, got %r" % (profile,))
    label = _label(profile)
    strategy, mig_profiles = _mig(profile, label)
    common, plugin = _flags(flags)

    config_flags = {"migStrategy": strategy}
    config_flags.update(common)
    if plugin:
        config_flags["plugin"] = plugin
    config = {"version": CONFIG_VERSION, "flags": config_flags}

    sharing = profile.get("sharing")
    if sharing is None:
        return config
    if not isinstance(sharing, dict):
        raise ValueError("%s: sharing must be a mapping with mode, got %r" % (label, sharing))
    _strict_keys(sharing, SHARING_KEYS, "%s: sharing" % label)
    mode = sharing.get("mode")
    if mode not in SHARING_MODES:
        raise ValueError("%s: sharing.mode must be one of %s, got %r" % (label, ", ".join(SHARING_MODES), mode))
    if mode == "none":
        extra = sorted(key for key in sharing if key != "mode")
        if extra:
            raise ValueError("%s: sharing.mode none takes no %s" % (label, ", ".join(extra)))
        return config

    if mode == "mps":
        if strategy == "mixed":
            raise ValueError("%s: sharing.mode mps with mig.strategy mixed: the device plugin refuses it "
                             "('using --mig-strategy=mixed is not supported with MPS')" % label)
        if strategy == "single":
            raise ValueError("%s: sharing.mode mps with mig.strategy single: the device plugin does not "
                             "share MIG devices with MPS ('sharing using MPS is not supported for MIG "
                             "devices'); use time-slicing or no MIG" % label)
        resources = [GPU_RESOURCE]
    elif strategy == "mixed":
        if not mig_profiles:
            raise ValueError("%s: time-slicing with mig.strategy mixed needs the MIG profiles to share: "
                             "give mig.profiles (e.g. [1g.10gb]) or a layout named all-<profile>" % label)
        try:
            resources = [mig_resource_name(item) for item in mig_profiles]
        except ValueError as exc:
            raise ValueError("%s: mig.profiles: %s" % (label, exc)) from exc
        if len(set(resources)) != len(resources):
            raise ValueError("%s: mig.profiles names a profile twice: %s" % (label, ", ".join(mig_profiles)))
    else:
        resources = [GPU_RESOURCE]
    key = "mps" if mode == "mps" else "timeSlicing"
    config["sharing"] = {key: _replicated(sharing, label, mode, resources)}
    return config


def _yaml_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_int(value):
        return str(value)
    if isinstance(value, str):
        if _YAML_PLAIN.fullmatch(value) and value.lower() not in _YAML_SPECIAL:
            return value
        return json.dumps(value)
    raise ValueError("cannot write %r as a YAML scalar" % (value,))


def _yaml_lines(value, indent):
    pad = "  " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append("%s%s:" % (pad, _yaml_scalar(key)))
                lines.extend(_yaml_lines(item, indent if isinstance(item, list) else indent + 1))
            else:
                lines.append("%s%s: %s" % (pad, _yaml_scalar(key), _yaml_flow(item)))
    else:
        for item in value:
            if isinstance(item, dict) and item:
                nested = _yaml_lines(item, indent + 1)
                lines.append(pad + "- " + nested[0].lstrip())
                lines.extend(nested[1:])
            else:
                lines.append("%s- %s" % (pad, _yaml_flow(item)))
    return lines


def _yaml_flow(value):
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (_yaml_scalar(key), _yaml_flow(item)) for key, item in value.items())
    if isinstance(value, list):
        return "[%s]" % ", ".join(_yaml_flow(item) for item in value)
    return _yaml_scalar(value)


def render_yaml(config):
    """YAML text for a config from build_device_plugin_config (block style, keys in order)."""
    if not isinstance(config, dict):
        raise ValueError("config must be a mapping, got %r" % (config,))
    return "\n".join(_yaml_lines(config, 0)) + "\n"


def device_plugin_config(profile, flags=None):
    """The device plugin's config file for a hardware profile, as YAML text.

    The text is read back (YAML 1.1, as the plugin's sigs.k8s.io/yaml reads it) and checked
    against the project's schema (SCHEMA_PATH) before anyone writes it: a config the builder
    lets through but the schema refuses raises ValueError instead of reaching a node.
    """
    config = build_device_plugin_config(profile, flags)
    text = render_yaml(config)
    check_rendered(text, config, _label(profile))
    return text


def check_rendered(text, config, label="config"):
    """Refuse TEXT unless it reads back as CONFIG and conforms to the schema."""
    parsed = yaml.safe_load(text)
    if parsed != config:
        raise ValueError("%s: the written config reads back as %r, not as %r" % (label, parsed, config))
    errors = schema_errors(parsed)
    if errors:
        raise ValueError("%s: the rendered config breaks the device plugin config schema (%s): %s"
                         % (label, os.path.basename(SCHEMA_PATH), "; ".join(errors)))


# ---------------------------------------------------------------- the schema, without jsonschema
# The controller has PyYAML (ansible-core needs it) but not necessarily jsonschema: this checks the
# keywords the schema uses, and refuses a schema that uses any other (tests/unit/k8s compare it
# with jsonschema on every config they hold).

_SCHEMA_CACHE = {}
_ANNOTATIONS = frozenset(("$schema", "$id", "title", "description", "$comment", "$defs"))
_KEYWORDS = frozenset(("$ref", "type", "const", "enum", "oneOf", "properties", "required", "additionalProperties",
                       "items", "minItems", "maxItems", "uniqueItems", "minimum", "maxLength", "pattern")) | _ANNOTATIONS


def load_schema(path=SCHEMA_PATH):
    """The schema at PATH (cached)."""
    if path not in _SCHEMA_CACHE:
        try:
            with open(path, encoding="utf-8") as handle:
                _SCHEMA_CACHE[path] = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ValueError("cannot read the device plugin config schema %s: %s" % (path, exc)) from exc
    return _SCHEMA_CACHE[path]


def schema_errors(config, schema=None):
    """Where CONFIG breaks SCHEMA (default: the project's): ['<path>: <reason>', ...], empty when it conforms."""
    schema = load_schema() if schema is None else schema
    errors = []
    _check(config, schema, schema, "config", errors)
    return errors


def _json_type(value, kind):
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if kind == "number":
        return True
    if kind == "integer":
        return isinstance(value, int) or (math.isfinite(value) and value.is_integer())
    raise ValueError("schema type %r is not supported" % (kind,))


def _json_key(value):
    """A key under which JSON-equal values are equal (true is not 1, as in JSON)."""
    return json.dumps(value, sort_keys=True)


def _ecma_pattern(pattern):
    # JSON Schema patterns are ECMA-262: '$' is the end of the string, not "before a final newline".
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return pattern


def _check(value, node, root, path, errors):
    unknown = sorted(set(node) - _KEYWORDS)
    if unknown:
        raise ValueError("the device plugin config schema uses %s, which this check does not know" % ", ".join(unknown))
    if "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/$defs/") or ref[len("#/$defs/"):] not in root.get("$defs", {}):
            raise ValueError("the device plugin config schema refers to %s, which it does not define" % ref)
        _check(value, root["$defs"][ref[len("#/$defs/"):]], root, path, errors)
    if "type" in node and not _json_type(value, node["type"]):
        errors.append("%s: %r is not of type %s" % (path, value, node["type"]))
        return
    if "const" in node and _json_key(value) != _json_key(node["const"]):
        errors.append("%s: %r is not %r" % (path, value, node["const"]))
    if "enum" in node and _json_key(value) not in [_json_key(item) for item in node["enum"]]:
        errors.append("%s: %r is not one of %s" % (path, value, ", ".join(repr(item) for item in node["enum"])))
    if "oneOf" in node:
        matched = sum(1 for branch in node["oneOf"] if not _branch_errors(value, branch, root, path))
        if matched != 1:
            errors.append("%s: %r matches %d of the schema's alternatives, not exactly one" % (path, value, matched))
    if isinstance(value, str):
        if "maxLength" in node and len(value) > node["maxLength"]:
            errors.append("%s: %r is longer than %d characters" % (path, value, node["maxLength"]))
        if "pattern" in node and not re.search(_ecma_pattern(node["pattern"]), value):
            errors.append("%s: %r does not match %s" % (path, value, node["pattern"]))
    if "minimum" in node and _json_type(value, "number") and value < node["minimum"]:
        errors.append("%s: %r is less than %r" % (path, value, node["minimum"]))
    if isinstance(value, list):
        _check_array(value, node, root, path, errors)
    if isinstance(value, dict):
        _check_object(value, node, root, path, errors)


def _branch_errors(value, branch, root, path):
    errors = []
    _check(value, branch, root, path, errors)
    return errors


def _check_array(value, node, root, path, errors):
    if "minItems" in node and len(value) < node["minItems"]:
        errors.append("%s: %d item(s), fewer than %d" % (path, len(value), node["minItems"]))
    if "maxItems" in node and len(value) > node["maxItems"]:
        errors.append("%s: %d item(s), more than %d" % (path, len(value), node["maxItems"]))
    if node.get("uniqueItems") and len(set(_json_key(item) for item in value)) != len(value):
        errors.append("%s: %r holds an item twice" % (path, value))
    if "items" in node:
        for index, item in enumerate(value):
            _check(item, node["items"], root, "%s[%d]" % (path, index), errors)


def _check_object(value, node, root, path, errors):
    for key in node.get("required", ()):
        if key not in value:
            errors.append("%s: %s is required" % (path, key))
    properties = node.get("properties", {})
    for key, item in value.items():
        if key in properties:
            _check(item, properties[key], root, "%s.%s" % (path, key), errors)
        elif node.get("additionalProperties") is False:
            errors.append("%s: %r is not a key the plugin knows" % (path, key))
        elif isinstance(node.get("additionalProperties"), dict):
            _check(item, node["additionalProperties"], root, "%s.%s" % (path, key), errors)
