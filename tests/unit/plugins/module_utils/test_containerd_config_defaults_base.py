# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plan_nvidia_runtime on files that name no runtime, given containerd's defaults, and
cri_tables_in_imports. Inputs: Debian 12's packaged /etc/containerd/config.toml and the
`containerd config default` outputs (tests/fixtures/containerd/, each with a .source).
containerd 1.6.20 and 1.7.24 with these files were run in molecule/container_runtime:
`containerd config dump` shows runc and nvidia side by side there."""


import tomllib

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.containerd_config import (
    cri_tables_in_imports,
    plan_nvidia_runtime,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

PACKAGED = fixture_text("containerd", "debian-packaged-1.6.20.toml")


def cri(text, plugin="io.containerd.grpc.v1.cri"):
    return tomllib.loads(text)["plugins"][plugin]


@pytest.mark.parametrize("version", ["1.6.20", "1.7.24"])
def test_packaged_file_gets_the_defaults_runc_beside_nvidia(version):
    default = fixture_text("containerd", "default-%s.toml" % version)
    plan = plan_nvidia_runtime(PACKAGED, default_text=default, containerd_version=version)
    assert plan["changed"] and plan["source_runtime"] == "runc"
    assert plan["text"].startswith(PACKAGED)
    runtimes = cri(plan["text"])["containerd"]["runtimes"]
    default_runc = cri(default)["containerd"]["runtimes"]["runc"]
    assert runtimes["runc"] == default_runc
    assert runtimes["nvidia"]["options"] == dict(default_runc["options"], BinaryName="/usr/bin/nvidia-container-runtime")
    assert cri(plan["text"])["cni"] == cri(PACKAGED)["cni"]
    assert plan["summary"][0].startswith("added runtime runc from containerd's defaults")
    assert plan_nvidia_runtime(plan["text"], default_text=default)["changed"] is False


def test_default_and_cdi_on_the_packaged_file():
    default = fixture_text("containerd", "default-1.7.24.toml")
    plan = plan_nvidia_runtime(PACKAGED, default_text=default, set_as_default=True, enable_cdi=True,
                               containerd_version="1.7.24")
    table = cri(plan["text"])
    assert table["containerd"]["default_runtime_name"] == "nvidia" and table["enable_cdi"] is True
    assert set(table["containerd"]["runtimes"]) == {"runc", "nvidia"}
    again = plan_nvidia_runtime(plan["text"], default_text=default, set_as_default=True, enable_cdi=True)
    assert again["changed"] is False


@pytest.mark.parametrize("name,version,plugin", [
    ("nvidia-only-v2.toml", "1.7.24", "io.containerd.grpc.v1.cri"),
    ("nvidia-only-v3.toml", "2.1.9", "io.containerd.cri.v1.runtime"),
])
def test_a_file_naming_only_nvidia_gets_runc_back(name, version, plugin):
    """What nvidia-ctk writes for an empty file (runc lost on 1.6/1.7, measured.source)."""
    text = fixture_text("containerd", "measured", name)
    default = fixture_text("containerd", "default-%s.toml" % version)
    plan = plan_nvidia_runtime(text, default_text=default)
    runtimes = cri(plan["text"], plugin)["containerd"]["runtimes"]
    assert runtimes["runc"] == cri(default, plugin)["containerd"]["runtimes"]["runc"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert plan_nvidia_runtime(plan["text"], default_text=default)["changed"] is False


def test_defaults_of_another_config_version_are_refused():
    with pytest.raises(ValueError, match="default_text is a version 3 config but current_text is version 2"):
        plan_nvidia_runtime(PACKAGED, default_text=fixture_text("containerd", "default-2.1.9.toml"))


def test_without_defaults_the_packaged_file_is_still_refused():
    with pytest.raises(ValueError, match="no runtime table to copy"):
        plan_nvidia_runtime(PACKAGED)


def test_cri_tables_in_imports():
    dropin = fixture_text("containerd", "measured", "nvidia-only-v2.toml")
    found = cri_tables_in_imports({"/etc/containerd/conf.d/b.toml": dropin,
                                   "/etc/containerd/conf.d/a.toml": 'version = 2\n[plugins."io.containerd.internal.v1.opt"]\n'},
                                  "io.containerd.grpc.v1.cri")
    assert found == {"/etc/containerd/conf.d/b.toml": ['plugins."io.containerd.grpc.v1.cri".containerd']}
    assert cri_tables_in_imports({"/x.toml": dropin}, "io.containerd.cri.v1.runtime") == {}
    with pytest.raises(ValueError, match="/bad.toml is not valid TOML"):
        cri_tables_in_imports({"/bad.toml": "version = "}, "io.containerd.grpc.v1.cri")
