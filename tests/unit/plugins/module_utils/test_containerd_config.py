# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The containerd nvidia-runtime planner on real configs, checked against real containerd.

Inputs: `containerd config default` of containerd 1.6.20 (Debian 12), 1.7.24 (Debian 13) and
2.1.9 (Debian sid) in tests/fixtures/containerd/, and the configs of containerd's
docs/cri/config.md in tests/fixtures/public/containerd-docs/ (each with a .source).
tests/fixtures/containerd/measured/ holds what those containerd binaries made of the
planner's output and of a conf.d drop-in (`containerd config dump`; measured.source).
Behaviour mirrored: NVIDIA/nvidia-container-toolkit v1.17.8
(f202b80a9b9d0db00d9b1d73c0128c8962c55f4d), pkg/config/engine/containerd/config.go and
containerd.go, pkg/config/engine/engine.go; the cases of its config_test.go are ported below.
"""


import copy
import difflib
import re
import tomllib

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.containerd_config import (
    DEFAULT_RUNTIME_PATH,
    containerd_config_version,
    plan_nvidia_runtime,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

V2 = ("plugins", "io.containerd.grpc.v1.cri")
V3 = ("plugins", "io.containerd.cri.v1.runtime")
DEFAULTS = {"1.6.20": V2, "1.7.24": V2, "2.1.9": V3}
# CDI is asked for where containerd has it (1.7 and later).
CDI = {"1.6.20": False, "1.7.24": True, "2.1.9": True}
DOCS = ["full-configuration-1.x", "full-configuration-2.x", "runtime-classes-1.x", "runtime-classes-2.x",
        "systemd-cgroup-1.x", "systemd-cgroup-2.x"]


def default_text(version):
    return fixture_text("containerd", "default-%s.toml" % version)


def measured(name):
    return fixture_text("containerd", "measured", name)


def docs_text(name):
    return fixture_text("public", "containerd-docs", name + ".toml")


def get(document, *path):
    for part in path:
        document = document[part]
    return document


def sandbox_image(document, version):
    if version == "2.1.9":
        return get(document, "plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox")
    return get(document, *V2)["sandbox_image"]


def realistic_configs():
    """(id, text) of every real config we have: the three defaults and containerd's docs."""
    configs = [("default-%s" % version, default_text(version)) for version in DEFAULTS]
    configs += [(name, docs_text(name)) for name in DOCS]
    # An operator's file: 1.7.24's defaults with the usual edits and comments of one's own.
    custom = default_text("1.7.24").replace("SystemdCgroup = false", "SystemdCgroup = true")
    custom = custom.replace('sandbox_image = "registry.k8s.io/pause:3.8"',
                            'sandbox_image = "registry.example.com/pause:3.10"  # our mirror')
    custom = custom.replace('config_path = ""', 'config_path = "/etc/containerd/certs.d"')
    custom = "# Managed by hand: systemd cgroups, our registry mirror.\n" + custom.replace(
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n',
        '        # runc stays the default for system pods\n'
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n')
    configs.append(("custom-1.7.24", custom))
    return configs


REALISTIC = realistic_configs()
OPTIONS = [
    {},
    {"set_as_default": True},
    {"enable_cdi": True},
    {"set_as_default": True, "enable_cdi": True, "runtime_path": "/usr/local/nvidia/toolkit/nvidia-container-runtime"},
]


def cri_path(document):
    return V3 if document["version"] == 3 else V2


def expected_document(before, options, source):
    expected = copy.deepcopy(before)
    cri = get(expected, *cri_path(before))
    runtimes = cri.setdefault("containerd", {}).setdefault("runtimes", {})
    nvidia = copy.deepcopy(runtimes[source])
    nvidia.setdefault("options", {})["BinaryName"] = options.get("runtime_path", DEFAULT_RUNTIME_PATH)
    nvidia.setdefault("runtime_type", "io.containerd.runc.v2")
    if not nvidia["runtime_type"]:
        nvidia["runtime_type"] = "io.containerd.runc.v2"
    runtimes["nvidia"] = nvidia
    if options.get("set_as_default"):
        cri["containerd"]["default_runtime_name"] = "nvidia"
    if options.get("enable_cdi"):
        cri["enable_cdi"] = True
    return expected


@pytest.mark.parametrize("options", OPTIONS, ids=["plain", "default", "cdi", "all"])
@pytest.mark.parametrize("name,text", REALISTIC, ids=[item[0] for item in REALISTIC])
def test_every_key_survives_and_only_the_asked_keys_change(name, text, options):
    before = tomllib.loads(text)
    plan = plan_nvidia_runtime(text, **options)
    after = tomllib.loads(plan["text"])
    assert after == expected_document(before, options, plan["source_runtime"])
    assert plan["changed"] is True
    # A minimal textual edit: lines are only added, except the two values changed in place.
    for line in difflib.ndiff(text.splitlines(), plan["text"].splitlines()):
        if line.startswith("- "):
            assert re.match(r"^- \s*(default_runtime_name|enable_cdi) = ", line), line
    # Every comment is still there, in order.
    assert [line for line in text.splitlines() if line.lstrip().startswith("#")] == [
        line for line in plan["text"].splitlines() if line.lstrip().startswith("#")]


@pytest.mark.parametrize("options", OPTIONS, ids=["plain", "default", "cdi", "all"])
@pytest.mark.parametrize("name,text", REALISTIC, ids=[item[0] for item in REALISTIC])
def test_a_second_run_changes_nothing(name, text, options):
    first = plan_nvidia_runtime(text, **options)
    second = plan_nvidia_runtime(first["text"], **options)
    assert second["changed"] is False
    assert second["summary"] == []
    assert second["text"] == first["text"]


def test_operator_file_keeps_its_settings_and_nvidia_copies_systemd_cgroup():
    text = dict(REALISTIC)["custom-1.7.24"]
    plan = plan_nvidia_runtime(text, set_as_default=True)
    after = tomllib.loads(plan["text"])
    runtimes = get(after, *V2)["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["runc"]["options"]["BinaryName"] == ""
    assert get(after, *V2)["sandbox_image"] == "registry.example.com/pause:3.10"
    assert get(after, *V2)["registry"]["config_path"] == "/etc/containerd/certs.d"
    assert 'sandbox_image = "registry.example.com/pause:3.10"  # our mirror\n' in plan["text"]
    assert plan["text"].startswith("# Managed by hand: systemd cgroups, our registry mirror.\n")
    assert plan["summary"] == [
        'added runtime nvidia (a copy of runc with options.BinaryName = "/usr/bin/nvidia-container-runtime")',
        'default_runtime_name: "runc" -> "nvidia"',
    ]


# --- What real containerd makes of the planner's files --------------------------------------

@pytest.mark.parametrize("version", sorted(DEFAULTS))
def test_planned_default_is_the_file_containerd_was_given(version):
    plan = plan_nvidia_runtime(default_text(version), set_as_default=True, enable_cdi=CDI[version],
                               containerd_version=version)
    assert plan["text"] == measured("planned-default-%s.toml" % version)
    assert plan["config_version"] == (3 if version == "2.1.9" else 2)
    assert plan["cri_plugin"] == DEFAULTS[version][1]
    assert plan["source_runtime"] == "runc"
    assert plan["imports"] == []


@pytest.mark.parametrize("version", sorted(DEFAULTS))
def test_containerd_reads_runc_and_nvidia_side_by_side(version):
    dump = tomllib.loads(measured("planned-default-dump-%s.toml" % version))
    default = tomllib.loads(default_text(version))
    cri = get(dump, *DEFAULTS[version])
    runtimes = cri["containerd"]["runtimes"]
    assert sorted(runtimes) == ["nvidia", "runc"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] == runtimes["runc"]["options"]["SystemdCgroup"]
    assert runtimes["runc"]["options"]["BinaryName"] == ""
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert sandbox_image(dump, version) == sandbox_image(default, version)
    if CDI[version]:
        assert cri["enable_cdi"] is True


def test_docs_snippet_planned_and_read_by_containerd_1x():
    text = docs_text("systemd-cgroup-1.x")
    plan = plan_nvidia_runtime(text)
    assert plan["text"] == measured("planned-systemd-cgroup-1.x.toml")
    assert plan["text"].startswith(text)
    for version in ("1.6.20", "1.7.24"):
        dump = tomllib.loads(measured("planned-systemd-cgroup-1.x-dump-%s.toml" % version))
        runtimes = get(dump, *V2)["containerd"]["runtimes"]
        assert sorted(runtimes) == ["nvidia", "runc"]
        assert runtimes["nvidia"]["options"] == {"SystemdCgroup": True,
                                                 "BinaryName": "/usr/bin/nvidia-container-runtime"}
        assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
        assert get(dump, *V2)["containerd"]["default_runtime_name"] == "runc"


# --- The measured fact: never a conf.d drop-in ---------------------------------------

@pytest.mark.parametrize("version", ["1.6.20", "1.7.24"])
def test_a_dropin_with_a_cri_table_replaces_the_whole_cri_section(version):
    """Issue 17: with a conf.d drop-in holding a CRI plugin table, `containerd config dump`
    shows only runtimes.nvidia; runc is gone and the sandbox image falls back to the default."""
    main = tomllib.loads(measured("dropin-main-%s.toml" % version))
    assert sorted(get(main, *V2)["containerd"]["runtimes"]) == ["runc"]
    assert get(main, *V2)["sandbox_image"] == "registry.example.com/pause:3.9"
    dump = tomllib.loads(measured("dropin-dump-%s.toml" % version))
    assert dump["imports"][-1].endswith("/conf.d/99-nvidia.toml")
    assert sorted(get(dump, *V2)["containerd"]["runtimes"]) == ["nvidia"]
    assert get(dump, *V2)["sandbox_image"] == sandbox_image(tomllib.loads(default_text(version)), version)


@pytest.mark.parametrize("version", ["1.6.20", "1.7.24", "2.1.9"])
def test_a_main_file_naming_only_nvidia_loses_runc_on_containerd_1x(version):
    dump = tomllib.loads(measured("nvidia-only-dump-%s.toml" % version))
    runtimes = get(dump, *DEFAULTS[version])["containerd"]["runtimes"]
    assert sorted(runtimes) == (["nvidia", "runc"] if version == "2.1.9" else ["nvidia"])


@pytest.mark.parametrize("name,text", REALISTIC, ids=[item[0] for item in REALISTIC])
def test_the_planner_never_writes_a_dropin(name, text):
    """It returns the whole main file: the CRI section of its output alone holds the copied
    runtime beside nvidia and every other CRI key, and imports are never touched."""
    plan = plan_nvidia_runtime(text, set_as_default=True)
    assert set(plan) == {"text", "changed", "summary", "config_version", "cri_plugin", "source_runtime",
                         "imports"}
    before, after = tomllib.loads(text), tomllib.loads(plan["text"])
    cri = cri_path(before)
    assert {plan["source_runtime"], "nvidia"} <= set(get(after, *cri)["containerd"]["runtimes"])
    assert {key: value for key, value in get(after, *cri).items() if key != "containerd"} == {
        key: value for key, value in get(before, *cri).items() if key != "containerd"}
    assert after.get("imports") == before.get("imports")


@pytest.mark.parametrize("name", ["nvidia-only-v2.toml", "nvidia-only-v3.toml"])
def test_a_dropin_is_refused_as_input(name):
    with pytest.raises(ValueError, match="no runtime table to copy for nvidia .* start from 'containerd config default'"):
        plan_nvidia_runtime(measured(name))


def test_imports_are_reported():
    plan = plan_nvidia_runtime(measured("dropin-main-1.7.24.toml"))
    assert plan["imports"] == ["/tmp/gpucloud-containerd-measure/conf.d/*.toml"]


# --- Empty or missing file: containerd's defaults ---------------------------------------------

@pytest.mark.parametrize("current", [None, "", "\n  \n", "# only a comment\n"])
def test_empty_file_needs_the_hosts_defaults(current):
    with pytest.raises(ValueError, match="current_text is empty .* pass the host's 'containerd config default' "
                                         "output as default_text"):
        plan_nvidia_runtime(current)


@pytest.mark.parametrize("version", sorted(DEFAULTS))
def test_empty_file_gets_the_defaults_with_nvidia(version):
    plan = plan_nvidia_runtime(None, set_as_default=True, enable_cdi=CDI[version],
                               default_text=default_text(version), containerd_version=version)
    assert plan["text"] == measured("planned-default-%s.toml" % version)
    assert plan["changed"] is True
    assert plan["summary"][0] == ("the file was empty: wrote containerd's defaults ('containerd config default') "
                                  "as the base")


def test_comment_only_file_keeps_its_comments_above_the_defaults():
    plan = plan_nvidia_runtime("# Managed by Ansible\n", default_text=default_text("1.7.24"))
    assert plan["text"].startswith("# Managed by Ansible\n\ndisabled_plugins = []\n")
    assert plan_nvidia_runtime(plan["text"])["changed"] is False


def test_defaults_that_are_not_toml():
    with pytest.raises(ValueError, match="default_text is not valid TOML"):
        plan_nvidia_runtime("", default_text="version = ")


# --- Which runtime is copied: ported from nvidia-container-toolkit v1.17.8 config_test.go ------

RUNC_FULL = """
version = 2
[plugins]
[plugins."io.containerd.grpc.v1.cri"]
\t[plugins."io.containerd.grpc.v1.cri".containerd]
\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
\t\tprivileged_without_host_devices = true
\t\truntime_engine = "engine"
\t\truntime_root = "root"
\t\truntime_type = "type"
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
\t\t\tBinaryName = "/usr/bin/runc"
\t\t\tSystemdCgroup = true
"""
DEFAULT_ONLY = """
version = 2
[plugins]
[plugins."io.containerd.grpc.v1.cri"]
\t[plugins."io.containerd.grpc.v1.cri".containerd]
\tdefault_runtime_name = "default"
\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.default]
\t\tprivileged_without_host_devices = true
\t\truntime_engine = "engine"
\t\truntime_root = "root"
\t\truntime_type = "type"
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.default.options]
\t\t\tBinaryName = "/usr/bin/default"
\t\t\tSystemdCgroup = true
"""
DEFAULT_AND_RUNC = """
version = 2
[plugins]
[plugins."io.containerd.grpc.v1.cri"]
\t[plugins."io.containerd.grpc.v1.cri".containerd]
\tdefault_runtime_name = "default"
\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
\t\tprivileged_without_host_devices = true
\t\truntime_engine = "engine"
\t\truntime_root = "root"
\t\truntime_type = "type"
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
\t\t\tBinaryName = "/usr/bin/runc"
\t\t\tSystemdCgroup = true
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.default]
\t\tprivileged_without_host_devices = false
\t\truntime_engine = "defaultengine"
\t\truntime_root = "defaultroot"
\t\truntime_type = "defaulttype"
\t\t[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.default.options]
\t\t\tBinaryName = "/usr/bin/default"
\t\t\tSystemdCgroup = false
"""
RUNC_V3 = RUNC_FULL.replace("version = 2", "version = 3").replace(
    "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")


@pytest.mark.parametrize("text,source,expected", [
    # config_test.go lines 55-95: "options from runc are imported".
    (RUNC_FULL, "runc", {"privileged_without_host_devices": True, "runtime_engine": "engine",
                         "runtime_root": "root", "runtime_type": "type",
                         "options": {"BinaryName": "/usr/bin/test", "SystemdCgroup": True}}),
    # lines 96-138: "options from default runtime are imported".
    (DEFAULT_ONLY, "default", {"privileged_without_host_devices": True, "runtime_engine": "engine",
                               "runtime_root": "root", "runtime_type": "type",
                               "options": {"BinaryName": "/usr/bin/test", "SystemdCgroup": True}}),
    # lines 139-197: "options from the default runtime take precedence over runc".
    (DEFAULT_AND_RUNC, "default", {"privileged_without_host_devices": False, "runtime_engine": "defaultengine",
                                   "runtime_root": "defaultroot", "runtime_type": "defaulttype",
                                   "options": {"BinaryName": "/usr/bin/test", "SystemdCgroup": False}}),
    # lines 219-258: "v3 spec is supported".
    (RUNC_V3, "runc", {"privileged_without_host_devices": True, "runtime_engine": "engine",
                       "runtime_root": "root", "runtime_type": "type",
                       "options": {"BinaryName": "/usr/bin/test", "SystemdCgroup": True}}),
], ids=["runc", "default runtime", "default before runc", "v3"])
def test_toolkit_cases(text, source, expected):
    plan = plan_nvidia_runtime(text, runtime_path="/usr/bin/test")
    assert plan["source_runtime"] == source
    document = tomllib.loads(plan["text"])
    cri = get(document, *cri_path(document))
    assert cri["containerd"]["runtimes"]["nvidia"] == expected
    assert "default_runtime_name" not in cri["containerd"] or cri["containerd"]["default_runtime_name"] == "default"


def test_toolkit_empty_config_case_is_refused():
    """config_test.go lines 37-54 / 198-218 write only the new runtime for an empty or
    version-only config; measured: containerd 1.x then has no runc. We refuse instead."""
    with pytest.raises(ValueError, match="no runtime table to copy"):
        plan_nvidia_runtime("version = 3\n")


def test_an_nvidia_default_is_not_copied():
    """engine.go lines 52-58: nvidia* default runtimes are skipped; runc is copied."""
    text = RUNC_FULL.replace('\t[plugins."io.containerd.grpc.v1.cri".containerd]\n',
                             '\t[plugins."io.containerd.grpc.v1.cri".containerd]\n\tdefault_runtime_name = "nvidia-cdi"\n')
    assert plan_nvidia_runtime(text)["source_runtime"] == "runc"


def test_crun_is_copied_when_there_is_no_runc():
    text = docs_text("runtime-classes-2.x").replace('default_runtime_name = "crun"', 'default_runtime_name = "kata"')
    # kata is the default but has no options; it is still the first candidate with a table.
    assert plan_nvidia_runtime(text)["source_runtime"] == "kata"
    text = text.replace('default_runtime_name = "kata"', 'default_runtime_name = "nvidia"')
    assert plan_nvidia_runtime(text)["source_runtime"] == "crun"


# --- default_runtime_name and enable_cdi -------------------------------------------------------

def test_default_runtime_left_alone_unless_asked():
    text = default_text("1.7.24").replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"')
    plan = plan_nvidia_runtime(text, set_as_default=False)
    assert get(tomllib.loads(plan["text"]), *V2)["containerd"]["default_runtime_name"] == "nvidia"
    plan = plan_nvidia_runtime(default_text("1.7.24"), set_as_default=False)
    assert get(tomllib.loads(plan["text"]), *V2)["containerd"]["default_runtime_name"] == "runc"
    assert not any("default_runtime_name" in line for line in plan["summary"])


def test_values_changed_in_place_keep_the_files_quotes():
    plan = plan_nvidia_runtime(default_text("2.1.9"), set_as_default=True)
    assert "      default_runtime_name = 'nvidia'\n" in plan["text"]
    assert "            BinaryName = '/usr/bin/nvidia-container-runtime'\n" in plan["text"]
    plan = plan_nvidia_runtime(docs_text("runtime-classes-2.x"), set_as_default=True)
    assert '  default_runtime_name = "nvidia"\n' in plan["text"]


def test_cdi_turned_on_in_place_and_added_where_missing():
    plan = plan_nvidia_runtime(default_text("1.7.24"), enable_cdi=True)
    assert "    enable_cdi = true\n" in plan["text"]
    assert "enable_cdi = false" not in plan["text"]
    assert "enable_cdi: false -> true" in plan["summary"]
    plan = plan_nvidia_runtime(default_text("1.6.20"), enable_cdi=True)
    assert '  [plugins."io.containerd.grpc.v1.cri"]\n    enable_cdi = true\n' in plan["text"]
    assert "enable_cdi: (unset) -> true" in plan["summary"]
    # 2.x turns CDI on by default: nothing to do.
    plan = plan_nvidia_runtime(default_text("2.1.9"), enable_cdi=True)
    assert not any("enable_cdi" in line for line in plan["summary"])


def test_implicit_tables_get_headers_parent_first():
    plan = plan_nvidia_runtime(docs_text("systemd-cgroup-1.x"), set_as_default=True, enable_cdi=True)
    assert plan["text"].startswith(
        'version = 2\n'
        '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n')


# --- An nvidia runtime that is already there ---------------------------------------------------

def test_nvidia_runtime_running_another_binary_is_refused_unless_replaced():
    """Issue 28 item 14: a GPU Operator's BinaryName is not overwritten silently."""
    first = plan_nvidia_runtime(default_text("1.7.24"))["text"]
    stale = first.replace('BinaryName = "/usr/bin/nvidia-container-runtime"',
                          'BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"  # GPU Operator')
    with pytest.raises(ValueError, match=r'current_text: runtime nvidia already runs '
                       r'"/usr/local/nvidia/toolkit/nvidia-container-runtime" .*set replace_runtime '
                       r'\(container_runtime_containerd_replace_nvidia\)'):
        plan_nvidia_runtime(stale)
    plan = plan_nvidia_runtime(stale, replace_runtime=True)
    assert plan["text"] == first
    assert plan["summary"] == [
        'replaced runtime nvidia (a copy of runc with options.BinaryName = "/usr/bin/nvidia-container-runtime"); '
        'changed: options.BinaryName']


def test_nvidia_runtime_follows_runc_options():
    first = plan_nvidia_runtime(default_text("2.1.9"))["text"]
    systemd = first.replace("SystemdCgroup = false", "SystemdCgroup = true", 1)  # runc's, which comes first
    plan = plan_nvidia_runtime(systemd)
    runtimes = get(tomllib.loads(plan["text"]), *V3)["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert plan["summary"][0].endswith("changed: options.SystemdCgroup")


def test_hand_written_nvidia_runtime_keeps_its_options():
    """Issue 28 item 14: the operator's options stay; runc's fill the gaps."""
    text = docs_text("runtime-classes-1.x") + (
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '      runtime_type = "io.containerd.runc.v2"\n'
        '      privileged_without_host_devices = true\n'
        '      pod_annotations = ["nvidia.com/*"]\n'
        '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '        BinaryName = "/usr/bin/nvidia-container-runtime"\n')
    plan = plan_nvidia_runtime(text)
    assert plan["changed"] is False and plan["summary"] == []
    operator = default_text("1.7.24").replace(
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n',
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          privileged_without_host_devices = true\n'
        '          pod_annotations = ["nvidia.com/*"]\n'
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            SystemdCgroup = true\n\n'
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n')
    plan = plan_nvidia_runtime(operator)
    runtimes = get(tomllib.loads(plan["text"]), *V2)["containerd"]["runtimes"]
    runc = runtimes["runc"]
    assert runtimes["nvidia"]["privileged_without_host_devices"] is True
    assert runtimes["nvidia"]["pod_annotations"] == ["nvidia.com/*"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == DEFAULT_RUNTIME_PATH
    # The node's cgroup driver is runc's; every other runc setting fills what nvidia lacked.
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is runc["options"]["SystemdCgroup"] is False
    assert runtimes["nvidia"]["runtime_type"] == runc["runtime_type"]
    assert runtimes["nvidia"]["options"]["Root"] == runc["options"]["Root"]
    assert plan["summary"][0].startswith("updated runtime nvidia (its own settings kept")
    assert plan_nvidia_runtime(plan["text"])["changed"] is False
    replaced = get(tomllib.loads(plan_nvidia_runtime(operator, replace_runtime=True)["text"]), *V2)
    assert replaced["containerd"]["runtimes"]["nvidia"]["privileged_without_host_devices"] is False


@pytest.mark.parametrize("tail,message", [
    ('    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n'
     '      nvidia.runtime_type = "io.containerd.runc.v2"\n', "is written with dotted keys"),
    ('    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n'
     '      nvidia = {runtime_type = "io.containerd.runc.v2"}\n', "is an inline table"),
])
def test_nvidia_runtime_in_other_forms_is_refused(tail, message):
    text = docs_text("systemd-cgroup-1.x") + tail
    with pytest.raises(ValueError, match="current_text: runtime nvidia " + message):
        plan_nvidia_runtime(text)


# --- The scanner: TOML that looks like headers but is not ---------------------------------------

TRICKY = '''version = 2
# [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia] in a comment
motd = """
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
a "quoted" line \\""" still inside
"""
literal = \'\'\'
[not.a.header]\'\'\'
nested = [
  ["a", "b"],  # a comment with [brackets]
  [1, 2],
]
when = 1979-05-27 07:32:00Z
"dotted.key" = {a = [1, {b = "}"}], c = 'x#y'}
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"   # the default
[ plugins . "io.containerd.grpc.v1.cri" . containerd . runtimes . runc ]
  runtime_type = "io.containerd.runc.v2"
  options = {SystemdCgroup = true, Root = "/run/runc"}
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
'''


def test_scanner_finds_only_real_headers_and_values():
    plan = plan_nvidia_runtime(TRICKY, set_as_default=True)
    after = tomllib.loads(plan["text"])
    assert after == expected_document(tomllib.loads(TRICKY), {"set_as_default": True}, "runc")
    assert '  default_runtime_name = "nvidia"   # the default\n' in plan["text"]
    # The nvidia tables come right after runc's, before the array of tables.
    assert plan["text"].index("runtimes.nvidia]\n") < plan["text"].index("[[plugins")
    assert plan_nvidia_runtime(plan["text"], set_as_default=True)["changed"] is False


def test_runtimes_written_as_inline_tables():
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n'
            '  runc = {runtime_type = "io.containerd.runc.v2", options = {SystemdCgroup = true}}\n')
    plan = plan_nvidia_runtime(text)
    nvidia = get(tomllib.loads(plan["text"]), *V2)["containerd"]["runtimes"]["nvidia"]
    assert nvidia == {"runtime_type": "io.containerd.runc.v2",
                      "options": {"SystemdCgroup": True, "BinaryName": DEFAULT_RUNTIME_PATH}}


def test_edit_that_would_break_the_file_is_refused():
    """The containerd table is defined by dotted keys, so a [..containerd] header would define it twice."""
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  containerd.snapshotter = "overlayfs"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
            '  runtime_type = "io.containerd.runc.v2"\n')
    assert plan_nvidia_runtime(text)["changed"] is True
    with pytest.raises(ValueError, match="the planned edit does not parse"):
        plan_nvidia_runtime(text, set_as_default=True)


# --- Versions and arguments ---------------------------------------------------------------------

@pytest.mark.parametrize("text,message", [
    ('[plugins.cri.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n',
     "current_text has no 'version' key, so containerd reads it as a version 1 config"),
    ("version = 4\n", r"current_text: version = 4; only version 2 \(containerd 1.x\) and 3"),
    ('version = "2"\n', r"current_text: version = '2'"),
    ("version = true\n", r"current_text: version = True"),
    ("version = 2\n[plugins\n", "current_text is not valid TOML"),
])
def test_unsupported_files(text, message):
    with pytest.raises(ValueError, match=message):
        plan_nvidia_runtime(text)


@pytest.mark.parametrize("kwargs,message", [
    ({"runtime_path": "nvidia-container-runtime"}, "runtime_path must be an absolute path"),
    ({"runtime_path": None}, "runtime_path must be an absolute path"),
    ({"set_as_default": "yes"}, "set_as_default must be true or false"),
    ({"enable_cdi": 1}, "enable_cdi must be true or false"),
    ({"containerd_version": "1.7.24"}, r"current_text is a version 3 config, which containerd 1.7.24 cannot read"),
    ({"containerd_version": "latest"}, r"containerd_version 'latest' is not a version"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_nvidia_runtime(default_text("2.1.9"), **kwargs)


def test_cdi_refused_on_containerd_16():
    with pytest.raises(ValueError, match=r"enable_cdi: containerd 1.6.20~ds1 has no CDI support"):
        plan_nvidia_runtime(default_text("1.6.20"), enable_cdi=True, containerd_version="1.6.20~ds1")


def test_text_must_be_text():
    with pytest.raises(ValueError, match="current_text must be the config file's text, got bytes"):
        plan_nvidia_runtime(b"version = 2\n")


@pytest.mark.parametrize("version,config_version", [
    ("1.6.20~ds1", 2), ("1.7.24", 2), ("v1.7.24", 2), ("2.1.9+unknown", 3), ("2.0", 3),
])
def test_containerd_config_version(version, config_version):
    assert containerd_config_version(version) == config_version


@pytest.mark.parametrize("version", ["0.9.0", "3.0.0", "abc", None])
def test_containerd_config_version_refuses(version):
    with pytest.raises(ValueError, match="containerd_version"):
        containerd_config_version(version)
