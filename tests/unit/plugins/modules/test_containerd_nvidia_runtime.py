# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""containerd_nvidia_runtime on real files in a temporary folder: Debian's packaged config,
containerd's defaults (tests/fixtures/containerd/), check mode, diff, imports."""


import os
import stat
import tomllib

from ansible_collections.gpucloud.fleet.plugins.modules import containerd_nvidia_runtime
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text, run_module

CRI = ("plugins", "io.containerd.grpc.v1.cri")


def run(args, check_mode=False):
    return run_module(containerd_nvidia_runtime, args, check_mode=check_mode)


def runtimes(path):
    with open(path, "rb") as handle:
        document = tomllib.load(handle)
    return document["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]


def write(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)


def test_debian_packaged_file_gets_runc_and_nvidia_then_nothing(tmp_path):
    config = tmp_path / "config.toml"
    packaged = fixture_text("containerd", "debian-packaged-1.6.20.toml")
    write(config, packaged, 0o640)
    default = fixture_text("containerd", "default-1.6.20.toml")

    checked = run({"path": str(config), "default_config": default, "containerd_version": "1.6.20"}, check_mode=True)
    assert checked["changed"] is True and config.read_text() == packaged
    assert checked["diff"]["before"] == packaged and "runtimes.nvidia]" in checked["diff"]["after"]
    assert len(checked["summary"]) == 2 and checked["summary"][0].startswith("added runtime runc from containerd's defaults")

    first = run({"path": str(config), "default_config": default, "containerd_version": "1.6.20"})
    assert first["changed"] is True and first["created"] is False
    assert config.read_text() == checked["diff"]["after"]
    assert config.read_text().startswith(packaged)  # every packaged line stays, in place
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o640
    table = runtimes(config)
    assert set(table["runtimes"]) == {"runc", "nvidia"}
    assert table["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert table["runtimes"]["runc"]["options"]["BinaryName"] == ""
    assert "default_runtime_name" not in table  # not asked: containerd's built-in default (runc) stays

    second = run({"path": str(config), "default_config": default, "containerd_version": "1.6.20"})
    assert second["changed"] is False and second["summary"] == []
    assert second["diff"]["before"] == second["diff"]["after"]


def test_missing_file_starts_from_the_defaults(tmp_path):
    config = tmp_path / "containerd" / "config.toml"
    result = run({"path": str(config), "default_config": fixture_text("containerd", "default-1.7.24.toml"),
                  "containerd_version": "1.7.24", "set_as_default": True, "enable_cdi": True})
    assert result["changed"] is True and result["created"] is True
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o644
    table = runtimes(config)
    assert table["default_runtime_name"] == "nvidia"
    with open(config, "rb") as handle:
        assert tomllib.load(handle)["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True
    assert result["diff"]["before_header"].endswith("(absent)")


def test_missing_file_in_check_mode_creates_nothing(tmp_path):
    config = tmp_path / "containerd" / "config.toml"
    result = run({"path": str(config), "default_config": fixture_text("containerd", "default-1.6.20.toml")},
                 check_mode=True)
    assert result["changed"] is True and not config.exists() and not config.parent.exists()


def test_cdi_on_containerd_16_fails_and_writes_nothing(tmp_path):
    config = tmp_path / "config.toml"
    default = fixture_text("containerd", "default-1.6.20.toml")
    write(config, default)
    result = run({"path": str(config), "default_config": default, "containerd_version": "1.6.20", "enable_cdi": True})
    assert result["failed"] is True and "enable_cdi came with containerd 1.7" in result["msg"]
    assert config.read_text() == default


def test_an_empty_file_without_defaults_fails(tmp_path):
    config = tmp_path / "config.toml"
    write(config, "")
    result = run({"path": str(config)})
    assert result["failed"] is True and "pass the host's 'containerd config default' output" in result["msg"]


def dropin_setup(tmp_path, dropin_text):
    config = tmp_path / "config.toml"
    main = fixture_text("containerd", "measured", "dropin-main-1.7.24.toml").replace(
        "/tmp/gpucloud-containerd-measure/conf.d/*.toml", "conf.d/*.toml")
    write(config, main)
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "99-nvidia.toml").write_text(dropin_text)
    return config, main


def test_an_imported_cri_table_is_refused_before_writing(tmp_path):
    config, main = dropin_setup(tmp_path, fixture_text("containerd", "measured", "nvidia-only-v2.toml"))
    result = run({"path": str(config)})
    assert result["failed"] is True
    assert str(tmp_path / "conf.d" / "99-nvidia.toml") in result["msg"]
    assert "replaces the main file's whole CRI section" in result["msg"]
    assert config.read_text() == main


def test_an_imported_cri_table_can_be_let_through_with_a_warning(tmp_path):
    config, main = dropin_setup(tmp_path, fixture_text("containerd", "measured", "nvidia-only-v2.toml"))
    result = run({"path": str(config), "cri_imports": "warn"})
    assert result["changed"] is True and config.read_text() != main
    assert len(result["warnings"]) == 1 and list(result["cri_imports"]) == [str(tmp_path / "conf.d" / "99-nvidia.toml")]


def test_an_import_without_a_cri_table_is_fine(tmp_path):
    config, _main = dropin_setup(tmp_path, 'version = 2\n[plugins."io.containerd.internal.v1.opt"]\n  path = "/opt/x"\n')
    result = run({"path": str(config)})
    assert result["changed"] is True and result["cri_imports"] == {} and result["warnings"] == []


# --- Issue 28 items 3, 14, 17 -----------------------------------------------------------------------

def test_a_symlinked_config_is_written_through_to_its_target(tmp_path):
    managed = tmp_path / "managed"
    managed.mkdir()
    target = managed / "containerd.toml"
    default = fixture_text("containerd", "default-1.7.24.toml")
    write(target, default, 0o640)
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    result = run({"path": str(link)})
    assert result["changed"] is True
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "nvidia" in runtimes(target)["runtimes"]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["config.toml", "managed"]
    assert sorted(os.listdir(managed)) == ["containerd.toml"]
    assert run({"path": str(link)})["changed"] is False


def test_a_directory_path_is_refused_by_name(tmp_path):
    result = run({"path": str(tmp_path)})
    assert result["failed"] is True and result["msg"] == "%s is a directory, not a config file" % tmp_path


def test_imports_of_the_wrong_type_are_refused_by_name(tmp_path):
    config = tmp_path / "config.toml"
    text = fixture_text("containerd", "default-1.7.24.toml").replace("imports = []", "imports = 5")
    write(config, text)
    result = run({"path": str(config)})
    assert result["failed"] is True
    assert result["msg"] == "%s: current_text: imports must be an array of file paths (strings), got 5" % config
    assert config.read_text() == text


def test_registry_credentials_never_reach_the_diff(tmp_path):
    config = tmp_path / "config.toml"
    text = fixture_text("containerd", "default-1.7.24.toml") + (
        '\n[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]\n'
        '  username = "robot"\n  password = "s3cr3t-pass"\n  auth = "cm9ib3Q6czNjcjN0"\n')
    write(config, text)
    for check_mode in (True, False):
        result = run({"path": str(config)}, check_mode=check_mode)
        assert result["changed"] is True
        shown = result["diff"]["before"] + result["diff"]["after"]
        assert "s3cr3t-pass" not in shown and "cm9ib3Q6czNjcjN0" not in shown
        assert 'password = "(redacted)"' in result["diff"]["after"] and "runtimes.nvidia]" in result["diff"]["after"]
    assert "s3cr3t-pass" in config.read_text()  # the file itself keeps them


def test_a_gpu_operator_runtime_is_refused_unless_replaced(tmp_path):
    config = tmp_path / "config.toml"
    first = run({"path": str(config), "default_config": fixture_text("containerd", "default-1.7.24.toml")})
    assert first["changed"] is True
    operator = config.read_text().replace('BinaryName = "/usr/bin/nvidia-container-runtime"',
                                          'BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"')
    write(config, operator)
    refused = run({"path": str(config)})
    assert refused["failed"] is True and "container_runtime_containerd_replace_nvidia" in refused["msg"]
    assert config.read_text() == operator
    replaced = run({"path": str(config), "replace_runtime": True})
    assert replaced["changed"] is True
    assert runtimes(config)["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
