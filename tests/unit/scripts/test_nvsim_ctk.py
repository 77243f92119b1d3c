# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""scripts/nvsim: the stand-in NVIDIA Container Toolkit (nvidia-ctk, nvidia-container-runtime) and its packages."""

import io
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.container_toolkit import validate_cdi_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NVSIM = os.path.join(ROOT, "scripts", "nvsim")
sys.path.insert(0, NVSIM)

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_ctk  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_smi  # noqa: E402  pylint: disable=wrong-import-position

OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (gpucloud-lab-stand-in)  x\n"


def lab(tmp_path, profile="h200-hgx8", proc=None, marker="580.95.05\n"):
    paths = {"proc": str(tmp_path / "proc"), "marker": str(tmp_path / "marker"), "profile": str(tmp_path / "profile"),
             "spec_dirs": (str(tmp_path / "etc-cdi"), str(tmp_path / "run-cdi"))}
    for key, text in (("proc", proc), ("marker", marker), ("profile", profile)):
        if text is not None:
            with open(paths[key], "w", encoding="utf-8") as handle:
                handle.write(text)
    return paths


def ctk(argv, paths):
    out, err = io.StringIO(), io.StringIO()
    return nvsim_ctk.main(argv, paths, out, err), out.getvalue(), err.getvalue()


def test_gpus_and_uuids_match_the_simulated_nvidia_smi():
    assert set(nvsim_ctk.PROFILE_GPUS) == set(nvsim_smi.PROFILES)
    for profile, count in nvsim_ctk.PROFILE_GPUS.items():
        assert count == len(nvsim_smi.PROFILES[profile]["bus"])
        assert nvsim_ctk.gpu_uuid(profile, 3) == nvsim_smi.gpu_uuid(profile, 3)


def test_driver_version_prefers_the_loaded_module():
    assert nvsim_ctk.driver_version(OPEN, "550.163.01\n") == "580.95.05"
    assert nvsim_ctk.driver_version(None, "550.163.01\n") == "550.163.01"
    with pytest.raises(nvsim_ctk.CtkError, match="failed to initialize NVML"):
        nvsim_ctk.driver_version(None, None)


def test_generate_writes_a_valid_yaml_spec_and_list_reads_it(tmp_path):
    paths = lab(tmp_path, proc=OPEN, marker="550.163.01\n")
    output = os.path.join(paths["spec_dirs"][0], "nvidia.yaml")
    status, out, err = ctk(["cdi", "generate", "--output=%s" % output], paths)
    assert status == 0 and out == "" and "Generated CDI spec" in err
    with open(output, encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)
    assert validate_cdi_spec(spec, "nvidia.com/gpu") == []
    assert spec["containerEdits"]["mounts"][0]["hostPath"].endswith("libcuda.so.580.95.05")
    assert oct(os.stat(output).st_mode & 0o777) == "0o644"
    with open(output, encoding="utf-8") as handle:
        assert "&id" not in handle.read()  # no YAML anchors: plain mappings, as nvidia-ctk writes
    status, out, err = ctk(["cdi", "list"], paths)
    assert status == 0 and "Found 17 CDI devices" in err
    assert out.splitlines()[:2] == ["nvidia.com/gpu=0", "nvidia.com/gpu=%s" % nvsim_smi.gpu_uuid("h200-hgx8", 0)]


def test_generate_json_and_stdout(tmp_path):
    paths = lab(tmp_path)
    status, out, _err = ctk(["cdi", "generate", "--output", str(tmp_path / "nvidia.json")], paths)
    assert status == 0 and out == "" and (tmp_path / "nvidia.json").read_text().startswith("{")
    status, out, _err = ctk(["cdi", "generate"], paths)
    assert status == 0 and yaml.safe_load(out)["kind"] == "nvidia.com/gpu"


def test_no_driver_and_no_gpus_fail_like_the_real_tool(tmp_path):
    status, _out, err = ctk(["cdi", "generate", "--output=%s" % (tmp_path / "x.yaml")], lab(tmp_path, marker=None))
    assert status == 1 and "ERROR_LIBRARY_NOT_FOUND" in err and not (tmp_path / "x.yaml").exists()
    other = tmp_path / "other"
    other.mkdir()
    status, _out, err = ctk(["cdi", "generate"], lab(other, profile=None))
    assert status == 1 and "no NVIDIA GPUs found" in err


@pytest.mark.parametrize("branch_dir,version", [("libnvidia-compute-580-server", "580.95.05"),
                                                ("libnvidia-compute-550-server", "550.163.01")])
def test_generate_reads_the_userspace_under_ubuntus_name(tmp_path, branch_dir, version):
    """On Ubuntu the stand-in NVML is libnvidia-compute-<branch>-server (no libnvidia-ml1 marker)."""
    paths = lab(tmp_path, marker=None)
    (tmp_path / "doc" / branch_dir).mkdir(parents=True)
    (tmp_path / "doc" / branch_dir / "nvsim-version").write_text(version + "\n", encoding="utf-8")
    paths["ubuntu_markers"] = str(tmp_path / "doc" / "libnvidia-compute-*" / "nvsim-version")
    status, _out, err = ctk(["cdi", "generate", "--output=%s" % (tmp_path / "x.yaml")], paths)
    assert status == 0, err
    assert "libcuda.so.%s" % version in (tmp_path / "x.yaml").read_text(encoding="utf-8")


def test_version_and_unknown_commands(tmp_path):
    assert nvsim_ctk.main(["--version"], lab(tmp_path), io.StringIO(), io.StringIO()) == 0
    out = io.StringIO()
    nvsim_ctk.main(["--version"], lab(tmp_path), out, io.StringIO())
    assert out.getvalue().startswith("NVIDIA Container Toolkit CLI version 0.0.0\ncommit: ")
    assert ctk(["runtime", "configure"], lab(tmp_path))[0] == 2


def test_toolkit_packages_as_nvidia_names_and_depends_them():
    specs = {spec["name"]: spec for spec in build_repo.container_toolkit_specs("1.17.8")}
    full = "1.17.8-1~gpucloudsim1"
    assert set(specs) == {"nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                          "libnvidia-container1"}
    for spec in specs.values():
        assert spec["version"] == full
        assert "gpucloud lab stand-in, not NVIDIA software" in build_repo.control_text(spec)
    assert specs["nvidia-container-toolkit"]["depends"] == [
        "nvidia-container-toolkit-base (= %s)" % full, "libnvidia-container-tools (= %s)" % full]
    base = specs["nvidia-container-toolkit-base"]["files"]
    assert 'VERSION = "1.17.8"' in base["/usr/lib/python3/dist-packages/nvsim_ctk.py"][0]
    runtime, mode = base["/usr/bin/nvidia-container-runtime"]
    assert mode == 0o755 and 'exec /usr/bin/runc "$@"' in runtime and build_repo.RUNTIME_LOG in runtime


def test_parse_args():
    assert build_repo.parse_args(["out"]) == (os.path.abspath("out"), build_repo.VERSIONS, ())
    assert build_repo.parse_args(["out", "--container-toolkit", "1.17.8", "--no-driver"]) == (
        os.path.abspath("out"), (), ("1.17.8",))
    assert build_repo.parse_args([]) is None and build_repo.parse_args(["a", "b"]) is None
    assert build_repo.parse_args(["out", "--bogus"]) is None


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("dpkg-deb", "apt-ftparchive", "gpg", "gpgconf", "runc")),
                    reason="needs dpkg-deb, apt-ftparchive, gpg (requirements/nvsim.deb) and runc")
def test_the_stand_in_runtime_logs_and_runs_runc(tmp_path):
    debs = build_repo.build(str(tmp_path / "out"), versions=(), toolkit_versions=("1.17.8",))
    assert len(debs) == 4
    base = [deb for deb in debs if "toolkit-base" in deb][0]
    subprocess.run(["dpkg-deb", "-x", base, str(tmp_path / "root")], check=True)
    script = (tmp_path / "root" / "usr" / "bin" / "nvidia-container-runtime").read_text()
    log = tmp_path / "calls.log"
    (tmp_path / "rt").write_text(script.replace(build_repo.RUNTIME_LOG, str(log)))
    os.chmod(tmp_path / "rt", 0o755)
    result = subprocess.run([str(tmp_path / "rt"), "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.startswith("runc version")
    assert log.read_text().rstrip().endswith("argv=--version")
