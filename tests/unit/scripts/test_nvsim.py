# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""scripts/nvsim: the simulated nvidia-smi answers as the real one, and our parsers read it."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import nvml, persistence, topology, xid
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance
from ansible_collections.gpucloud.fleet.plugins.module_utils.smi_xml import parse_smi_q, parse_smi_xml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NVSIM = os.path.join(ROOT, "scripts", "nvsim")
sys.path.insert(0, NVSIM)

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_daemons  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_fault  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_smi  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# The package whose version container_runtime (and cuda_toolkit) read as the driver's on Ubuntu.
with open(os.path.join(ROOT, "roles", "container_runtime", "vars", "Ubuntu.yml"), encoding="utf-8") as _vars:
    UBUNTU_DRIVER_REGEX = yaml.safe_load(_vars)["__container_runtime_driver_package_regex"]
H200 = os.path.join(FIXTURES, "h200-ubuntu2404-driver580")
BUS_H200 = ["00000000:%s:00.0" % bus for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")]


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


def profile_data(profile):
    return {key: fixture(build_repo.CAPTURES[path]) if path else None
            for key, path in ((key, nvsim_smi.PROFILES[profile][key]) for key in ("xml", "q", "table", "topo_legend"))}


def host(profile="h200-hgx8", userspace="580.95.05", module="580.95.05", **changes):
    state = nvsim_smi.empty_state(userspace)
    state.update(module_version=module, profile=profile, persistenced=True)
    state.update(changes)
    return state


def smi(argv, state):
    return nvsim_smi.answer(argv, state, profile_data(state["profile"]) if state["profile"] else {})


@pytest.mark.parametrize("profile,name,bus0", [("h200-hgx8", "NVIDIA H200", BUS_H200[0]),
                                               ("a100-sxm8", "NVIDIA A100-SXM4-40GB", "00000000:07:00.0")])
@pytest.mark.parametrize("args,parse", [(["-q", "-x"], parse_smi_xml), (["-q"], parse_smi_q)])
def test_eight_distinct_gpus(profile, name, bus0, args, parse):
    out = smi(args, host(profile))
    assert out["rc"] == 0
    facts = parse(out["stdout"])
    assert facts["gpu_count"] == 8
    assert len(set(g["uuid"] for g in facts["gpus"])) == 8
    assert len(set(g["pci_bus_id"] for g in facts["gpus"])) == 8
    assert len(set(g["serial"] for g in facts["gpus"])) == 8
    assert facts["gpus"][0]["pci_bus_id"] == bus0
    assert all(g["name"] == name and g["persistence_mode"] is True for g in facts["gpus"])
    assert all(g["mig"]["current"] is False for g in facts["gpus"])
    assert facts["driver_version"] == "580.95.05" and facts["cuda_driver_version"] == "13.0"


def test_h200_bus_ids_and_uuids_are_stable():
    facts = parse_smi_xml(smi(["-q", "-x"], host())["stdout"])
    assert [g["pci_bus_id"] for g in facts["gpus"]] == BUS_H200
    assert facts["gpus"][3]["uuid"] == nvsim_smi.gpu_uuid("h200-hgx8", 3)
    assert facts["gpus"][0]["uuid"] != "GPU-4fc604de-9030-742c-d69f-594418e871d5"  # not the captured GPU's
    assert smi(["-L"], host())["stdout"].splitlines()[7] == (
        "GPU 7: NVIDIA H200 (UUID: %s)" % nvsim_smi.gpu_uuid("h200-hgx8", 7))


def test_version_follows_the_installed_userspace():
    state = host(userspace="550.163.01", module="550.163.01")
    facts = parse_smi_xml(smi(["-q", "-x"], state)["stdout"])
    assert (facts["driver_version"], facts["cuda_driver_version"]) == ("550.163.01", "12.4")
    assert parse_smi_q(smi(["-q"], state)["stdout"])["driver_version"] == "550.163.01"
    table = smi([], state)["stdout"].splitlines()
    assert "Driver Version: 550.163.01" in table[2] and "CUDA Version: 12.4" in table[2]
    csv = smi(["--query-gpu=index,driver_version", "--format=csv,noheader"], state)["stdout"]
    assert csv.splitlines()[5] == "5, 550.163.01"


def test_table_keeps_the_captured_layout():
    captured = fixture("h200-ubuntu2404-driver580", "nvidia-smi.txt").splitlines()
    table = smi([], host(userspace="580.159.04", module="580.159.04"))["stdout"].splitlines()
    assert table[2] == captured[2]
    assert table[3:8] == captured[3:8]
    assert table[8].replace("18:00.0", "00:06.0") == captured[8]
    assert len(table[9]) == len(captured[9]) and table[10] == captured[10]
    assert table[11] == captured[11]
    assert sum(1 for line in table if "NVIDIA H200" in line) == 8


@pytest.mark.parametrize("profile,code,cpus", [("h200-hgx8", "NV18", "0-55,112-167"),
                                               ("a100-sxm8", "NV12", "0-31,64-95")])
def test_topology_parses_with_eight_gpus(profile, code, cpus):
    parsed = topology.parse_topo_matrix(smi(["topo", "-m"], host(profile))["stdout"])
    assert parsed["gpus"] == ["GPU%d" % index for index in range(8)]
    assert {parsed["links"][a][b] for a in parsed["gpus"] for b in parsed["gpus"] if a != b} == {code}
    assert parsed["affinity"]["GPU0"]["cpus"] == cpus
    assert topology.check_expect(parsed, {"gpu_count": 8, "min_nvlinks": int(code[2:])}) == []


def test_h200_topology_matches_the_public_capture_rows():
    public = fixture("public", "topo", "h100-8gpu-nv18-10nic-vllm29944-excerpt.txt").splitlines()
    simulated = topology.parse_topo_matrix(smi(["topo", "-m"], host())["stdout"])
    for row in public[1:]:
        cells = row.split()
        gpu = cells[0]
        assert cells[1:9] == [" X ".strip() if other == gpu else simulated["links"][gpu][other]
                              for other in simulated["gpus"]]
        assert (cells[-3], cells[-2]) == (simulated["affinity"][gpu]["cpus"], simulated["affinity"][gpu]["numa"])


def test_no_module_loaded():
    out = smi(["-q", "-x"], host(module=None))
    assert out["rc"] == 9 == nvml.SMI_DRIVER_NOT_LOADED
    assert out["stdout"] == ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                             "Make sure that the latest NVIDIA driver is installed and running.\n")
    assert nvml.collect_smi(lambda args: (out["rc"], out["stdout"], ""))["driver_loaded"] is False


def test_loaded_module_differs_from_userspace():
    out = smi([], host(userspace="580.95.05", module="550.163.01"))
    assert out["rc"] == 18
    assert out["stdout"] == "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"


def test_no_profile_means_no_gpus():
    out = smi(["-L"], host(profile=None))
    assert (out["rc"], out["stdout"]) == (6, "No devices were found\n")
    facts = nvml.collect_smi(lambda args: (out["rc"], out["stdout"], ""))
    assert facts["driver_loaded"] is True and facts["gpus"] == []


def test_nvidia_gpu_facts_path_reads_the_simulation():
    state = host()

    def run(args):
        answer = smi(args, state)
        return answer["rc"], answer["stdout"], answer["stderr"]

    facts = nvml.collect_smi(run)
    assert facts["gpu_count"] == 8
    assert {g["compute_capability"] for g in facts["gpus"]} == {"9.0"}
    assert facts["gpus"][0]["architecture"] == "Hopper"


def test_ecc_fault_is_seen_by_the_parsers_and_acceptance():
    state = host(faults=nvsim_fault.apply({}, "ecc-dbe", gpu=2))
    for args, parse in ((["-q", "-x"], parse_smi_xml), (["-q"], parse_smi_q)):
        gpus = parse(smi(args, state)["stdout"])["gpus"]
        assert gpus[2]["ecc"]["uncorrected_volatile"] == 1 and gpus[2]["ecc"]["uncorrected_aggregate"] == 1
        assert gpus[2]["remapped_rows"]["pending"] is True
        assert gpus[1]["ecc"]["uncorrected_volatile"] == 0 and gpus[1]["remapped_rows"]["pending"] is False
    csv = smi(["--query-gpu=index,ecc.errors.uncorrected.volatile.total", "--format=csv,noheader"], state)["stdout"]
    assert csv.splitlines()[2] == "2, 1"
    nvidia = dict(nvml.empty_facts("nvidia-smi", driver_loaded=True))
    nvidia.update(parse_smi_xml(smi(["-q", "-x"], state)["stdout"]))
    profile = {"name": "hgx-h200", "gpu_count": 8, "gpu_model": "H200", "gpu_memory_mib_min": 140000}
    checks = {c["check"]: c for c in acceptance.evaluate("node1", profile, observed={"nvidia": nvidia})}
    assert checks["gpu.count"]["status"] == "pass" and checks["gpu.persistence"]["status"] == "pass"
    assert checks["gpu.ecc_errors"]["status"] == "fail" and checks["gpu.ecc_errors"]["detail"].startswith("GPU2 ")
    assert checks["gpu.row_remap"]["status"] == "fail"
    cleared = host(faults=nvsim_fault.apply(state["faults"], "clear"))
    nvidia.update(parse_smi_xml(smi(["-q", "-x"], cleared)["stdout"]))
    checks = {c["check"]: c for c in acceptance.evaluate("node1", profile, observed={"nvidia": nvidia})}
    assert checks["gpu.ecc_errors"]["status"] == "pass" and checks["gpu.row_remap"]["status"] == "pass"


def test_nvlink_fault_is_seen_in_topology_and_nvlink_status():
    state = host(faults=nvsim_fault.apply({}, "nvlink-down", gpu=1, link=5))
    parsed = topology.parse_topo_matrix(smi(["topo", "-m"], state)["stdout"])
    assert parsed["links"]["GPU1"]["GPU4"] == "NV17" and parsed["links"]["GPU0"]["GPU2"] == "NV18"
    mismatches = topology.check_expect(parsed, {"min_nvlinks": 18})
    assert mismatches and all("GPU1" in m for m in mismatches)
    status = smi(["nvlink", "-s", "-i", "1"], state)["stdout"].splitlines()
    assert status[0].startswith("GPU 1: NVIDIA H200 (UUID: GPU-")
    assert status[6] == "\t Link 5: <inactive>" and status[1] == "\t Link 0: 26.562 GB/s" and len(status) == 19


def test_xid_line_is_read_by_the_xid_parser():
    line = nvsim_fault.xid_line("18", 79)
    assert line == "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    events = xid.parse_xid_events("[  12.3] " + line + "\n")
    assert [(e["code"]) for e in events] == [79]


PM_QUERY = ["--query-gpu=index,uuid,persistence_mode", "--format=csv,noheader"]


def test_persistence_follows_the_daemon_and_legacy_switch():
    def modes(state):
        return [g["persistence"] for g in persistence.parse_persistence_csv(smi(PM_QUERY, state)["stdout"])]

    assert modes(host(persistenced=True)) == [True] * 8
    assert modes(host(persistenced=None)) == [False] * 8      # daemon not running
    assert modes(host(persistenced=False)) == [False] * 8     # running with --no-persistence-mode
    out = smi(["-i", "3", "-pm", "1"], host(persistenced=None))
    assert out["rc"] == 0 and out["stdout"] == ("Enabled Legacy persistence mode for GPU 00000000:5D:00.0.\n"
                                                "All done.\n")
    assert modes(host(persistenced=None, persistence_overrides=out["persistence_overrides"])) == (
        [False] * 3 + [True] + [False] * 4)
    denied = smi(["-pm", "1"], host(root=False))
    assert denied["rc"] == 4 and "Insufficient Permissions" in denied["stdout"]


def test_persistenced_stand_in_honours_no_persistence_mode():
    loaded = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build"
    assert nvsim_daemons.persistenced_check(["--verbose"], loaded)[:2] == (True, True)
    assert nvsim_daemons.persistenced_check(["--no-persistence-mode"], loaded)[:2] == (True, False)
    assert nvsim_daemons.persistenced_check([], None)[0] is False


@pytest.mark.parametrize("running,state_word,status_word", [(True, "Completed", "Success"),
                                                            (False, "In Progress", "N/A")])
def test_fabric_state_follows_fabric_manager(running, state_word, status_word):
    state = host(fabricmanager=running)
    xml = smi(["-q", "-x"], state)["stdout"]
    assert xml.count("<state>%s</state>" % state_word) == 8 and xml.count("<status>%s</status>" % status_word) == 8
    text = smi(["-q"], state)["stdout"]
    assert text.count("        State                                          : %s" % state_word) == 8


def test_fabric_manager_refuses_another_driver_version():
    loaded = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.163.01  Release Build  (x)  date"
    ok, message = nvsim_daemons.fabricmanager_check("580.95.05", loaded)
    assert not ok and "interface version 580.95.05 don't match with driver version 550.163.01" in message
    assert nvsim_daemons.fabricmanager_check("580.95.05", None)[0] is False
    assert nvsim_daemons.fabricmanager_check("550.163.01", loaded)[0] is True


def test_gpu_selection_and_bad_arguments():
    facts = parse_smi_xml(smi(["-q", "-x", "-i", "6"], host())["stdout"])
    assert [g["pci_bus_id"] for g in facts["gpus"]] == [BUS_H200[6]]
    assert smi(["-i", "9", "-L"], host())["rc"] == 6
    assert smi(["--bogus"], host())["rc"] == 2
    bad = smi(["--query-gpu=index,nonsense", "--format=csv"], host())
    assert bad["rc"] == 2 and bad["stdout"] == 'Field "nonsense" is not a valid field to query.\n'


def test_query_gpu_fields():
    fields = ("index,uuid,name,pci.bus_id,driver_version,persistence_mode,compute_cap,memory.total,memory.used,"
              "temperature.gpu,power.draw,utilization.gpu,ecc.errors.uncorrected.volatile.total")
    out = smi(["--query-gpu=" + fields, "--format=csv"], host())["stdout"].splitlines()
    assert out[0].startswith("index, uuid, name, pci.bus_id, driver_version, persistence_mode, compute_cap, "
                             "memory.total [MiB], memory.used [MiB], temperature.gpu, power.draw [W]")
    assert len(out) == 9 and out[1].split(", ")[6:9] == ["9.0", "143771 MiB", "0 MiB"]
    bare = smi(["--query-gpu=index,memory.total", "--format=csv,noheader,nounits"], host())["stdout"]
    assert bare.splitlines()[0] == "0, 143771"
    # What remediate_rma.yml's bundle reads: serial, VBIOS and InfoROM image from the H200 capture.
    rma = smi(["--query-gpu=index,serial,vbios_version,inforom.img", "--format=csv,noheader"], host())
    assert rma["rc"] == 0, rma
    assert rma["stdout"].splitlines()[2].split(", ")[2:] == ["96.00.A5.00.1A", "G520.0282.02.02"]


def test_loaded_version_uses_the_roles_regex():
    real = fixture("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt")
    assert nvsim_smi.loaded_version(real) == "580.159.04"
    source = open(os.path.join(NVSIM, "kmod", "nvidia.c"), encoding="utf-8").read()
    assert "NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (gpucloud-lab-stand-in)" in source


@pytest.mark.parametrize("version,fm,nscq", [("550.163.01", "nvidia-fabricmanager-550", "libnvidia-nscq-550"),
                                             ("580.95.05", "nvidia-fabricmanager", "libnvidia-nscq")])
def test_package_names_and_pins(version, fm, nscq):
    specs = {spec["name"]: spec for spec in build_repo.package_specs(version)}
    full = "%s-1~gpucloudsim1" % version
    for name in ("nvidia-smi", "libnvidia-ml1", "libcuda1", "nvidia-persistenced", "nvidia-open-kernel-dkms",
                 "nvidia-kernel-dkms", fm, nscq):
        assert specs[name]["version"] == full
        assert "gpucloud lab stand-in, not NVIDIA software" in build_repo.control_text(specs[name])
    assert "libnvidia-ml1 (= %s)" % full in specs["nvidia-smi"]["depends"]
    assert "%s (= %s)" % (nscq, full) in specs[fm]["depends"]
    assert specs["nvidia-open-kernel-dkms"]["extra"]["Conflicts"] == "nvidia-kernel-dkms"
    assert "nvidia" in specs["nvidia-open-kernel-dkms"]["files"]["/etc/modules-load.d/nvidia-standin.conf"][0]
    dkms = specs["nvidia-kernel-dkms"]["files"]["/usr/src/nvidia-%s/dkms.conf" % version][0]
    assert 'PACKAGE_VERSION="%s"' % version in dkms and "AUTOINSTALL=yes" in dkms
    assert "modprobe" not in specs["nvidia-open-kernel-dkms"]["scripts"]["postinst"]
    # NVIDIA has no branch-named Fabric Manager/NSCQ from 580 on, and the role no longer asks
    # for them (gpucloud.fleet.nvidia_fabric_manager_packages): no compatibility shims.
    assert [name for name in specs if name.endswith("-580")] == []


@pytest.mark.parametrize("version,branch", [("550.163.01", "550"), ("580.95.05", "580")])
def test_ubuntu_named_userspace_matches_the_roles_regex_and_stands_for_libnvidia_ml1(version, branch):
    specs = {spec["name"]: spec for spec in build_repo.package_specs(version)}
    full = "%s-1~gpucloudsim1" % version
    ubuntu = [name for name in specs if re.match(UBUNTU_DRIVER_REGEX, name)]
    assert ubuntu == ["libnvidia-compute-%s-server" % branch]
    spec = specs[ubuntu[0]]
    assert spec["version"] == full
    assert spec["files"]["/usr/share/doc/%s/nvsim-version" % ubuntu[0]][0] == version + "\n"
    # nvidia-smi's "libnvidia-ml1 (= VERSION)" holds; one branch (and one NVML) at a time.
    assert "libnvidia-ml1 (= %s)" % full in spec["extra"]["Provides"].split(", ")
    assert set(spec["extra"]["Conflicts"].split(", ")) == {"libnvidia-ml1", "libnvidia-compute"}
    assert "libnvidia-compute" in spec["extra"]["Provides"].split(", ")
    assert not re.match(UBUNTU_DRIVER_REGEX, "libnvidia-ml1")


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("dpkg-deb", "apt-ftparchive", "gpg", "gpgconf")),
                    reason="needs dpkg-deb, apt-ftparchive (apt-utils) and gpg: see requirements/nvsim.deb")
def test_build_repo_makes_a_signed_flat_repository(tmp_path):
    outdir = str(tmp_path / "nvsim")
    debs = build_repo.build(outdir)
    assert len(debs) == 18  # 9 per driver version (550, 580), no shims
    repo = os.path.join(outdir, "repo")
    for name in ("Packages", "Packages.gz", "Release", "InRelease", "Release.gpg", "key.asc"):
        assert os.path.isfile(os.path.join(repo, name))
    deb = os.path.join(repo, "nvidia-smi_580.95.05-1~gpucloudsim1_amd64.deb")
    fields = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Version", "Depends"], check=True,
                            capture_output=True, text=True).stdout
    assert "Version: 580.95.05-1~gpucloudsim1" in fields and "libnvidia-ml1 (= 580.95.05-1~gpucloudsim1)" in fields
    listing = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True, text=True).stdout
    assert "root/root" in listing and "./usr/bin/nvidia-smi" in listing
    ubuntu = os.path.join(repo, "libnvidia-compute-580-server_580.95.05-1~gpucloudsim1_amd64.deb")
    provides = subprocess.run(["dpkg-deb", "-f", ubuntu, "Provides"], check=True, capture_output=True, text=True).stdout
    assert provides.strip() == "libnvidia-ml1 (= 580.95.05-1~gpucloudsim1), libnvidia-compute"
    verify = subprocess.run(["gpg", "--batch", "--verify", "InRelease"], cwd=repo, capture_output=True, text=True,
                            env=dict(os.environ, GNUPGHOME=os.path.join(outdir, "gnupg")), check=False)
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=dict(os.environ, GNUPGHOME=os.path.join(outdir, "gnupg")),
                   check=False)
    assert verify.returncode == 0
    with open(os.path.join(repo, "Packages"), encoding="utf-8") as handle:
        assert handle.read().count("Package: nvidia-smi\n") == 2


def test_fault_command_line_takes_options_anywhere():
    """molecule/metal injects `nvsim-fault xid --gpu 3 79`: plain argparse refused the code after an option."""
    for argv in (["xid", "--gpu", "3", "79"], ["xid", "79", "--gpu", "3"], ["--gpu", "3", "xid", "79"]):
        args = nvsim_fault.parse_args(argv)
        assert (args.command, args.code, args.gpu) == ("xid", 79, 3), argv
    assert nvsim_fault.parse_args(["ecc-dbe", "--gpu", "1"]).code is None


def test_fault_refuses_a_gpu_the_profile_lacks(tmp_path, monkeypatch, capsys):
    """No simulated GPU 1 without a profile: a usage error (exit 2) naming it, and nothing written."""
    monkeypatch.setattr(nvsim_smi, "PROFILE_FILE", str(tmp_path / "profile"))
    monkeypatch.setattr(nvsim_smi, "FAULTS_FILE", str(tmp_path / "faults.json"))
    with pytest.raises(SystemExit) as exit_info:
        nvsim_fault.main(["ecc-dbe", "--gpu", "1"])
    assert exit_info.value.code == 2
    assert "no GPU 1 in profile None" in capsys.readouterr().err
    assert not (tmp_path / "faults.json").exists()


def _h200_fault_files(tmp_path, monkeypatch):
    monkeypatch.setattr(nvsim_smi, "PROFILE_FILE", str(tmp_path / "profile"))
    monkeypatch.setattr(nvsim_smi, "FAULTS_FILE", str(tmp_path / "faults.json"))
    (tmp_path / "profile").write_text("h200-hgx8\n")


def test_xid_goes_through_the_kernel_module_switch(tmp_path, monkeypatch):
    """The Xid line is written to the stand-in module's switch, which prints it as a kernel message.

    Written to /dev/kmsg from userspace, it was filed under LOG_USER and journald stripped
    "NVRM:" as a syslog identifier, so verify's `journalctl -k` read no Xid (metal lane, 2026-12-01).
    """
    _h200_fault_files(tmp_path, monkeypatch)
    switch = tmp_path / "gpucloud-xid"
    switch.write_text("")
    monkeypatch.setattr(nvsim_fault, "XID_SWITCH", str(switch))
    assert nvsim_fault.main(["xid", "--gpu", "3", "79"]) == 0
    written = switch.read_text()
    assert written.startswith("NVRM: Xid (PCI:0000:") and written.endswith("\n")
    assert [e["code"] for e in xid.parse_xid_events(written)] == [79]
    assert json.loads((tmp_path / "faults.json").read_text())["xid"] == [{"gpu": 3, "code": 79}]


def test_xid_without_the_module_loaded_is_refused(tmp_path, monkeypatch, capsys):
    _h200_fault_files(tmp_path, monkeypatch)
    monkeypatch.setattr(nvsim_fault, "XID_SWITCH", str(tmp_path / "absent"))
    with pytest.raises(SystemExit) as exit_info:
        nvsim_fault.main(["xid", "79"])
    assert exit_info.value.code == 2
    assert "stand-in nvidia module is not loaded" in capsys.readouterr().err
    assert not (tmp_path / "faults.json").exists()


def test_gpu_reset_clears_that_gpus_ecc_fault_and_refuses_a_busy_or_unnamed_gpu():
    faults = nvsim_fault.apply(nvsim_fault.apply({}, "ecc-dbe", gpu=2), "ecc-dbe", gpu=5)
    state = host(faults=faults, root=True)
    done = smi(["-r", "-i", "2"], state)
    assert done["rc"] == 0
    assert done["stdout"] == "GPU %s was successfully reset.\nAll done.\n" % BUS_H200[2]
    assert done["faults"]["ecc_dbe"] == [5] and done["faults"]["resets"] == [2]
    after = host(faults=done["faults"])
    gpus = parse_smi_xml(smi(["-q", "-x"], after)["stdout"])["gpus"]
    assert gpus[2]["ecc"]["uncorrected_volatile"] == 0 and gpus[2]["remapped_rows"]["pending"] is False
    assert gpus[5]["ecc"]["uncorrected_volatile"] == 1  # another GPU's fault stays
    assert smi(["-r"], state)["rc"] == nvsim_smi.EXIT_INVALID_ARGUMENT
    assert smi(["-r", "-i", "2"], host(faults=faults, root=False))["rc"] == nvsim_smi.EXIT_NO_PERMISSION
    busy = host(faults=nvsim_fault.apply(faults, "busy", gpu=2, pid=777), root=True)
    refused = smi(["--gpu-reset", "-i", "2"], busy)
    assert refused["rc"] == nvsim_smi.EXIT_IN_USE and refused["faults"] is None
    assert "currently in use" in refused["stdout"]
