"""Verify gpucloud.fleet.nvidia_driver on the lab nodes' real package, apt and unit state."""
import json
import os
import re

import pytest

# As molecule.yml, prepare.yml and converge.yml set the nodes up. Ubuntu's packages are the
# archive's real server driver (noble-updates / jammy-updates, restricted and multiverse).
UBUNTU_NOBLE_595 = ["nvidia-utils-595-server", "libnvidia-compute-595-server", "nvidia-compute-utils-595-server",
                    "nvidia-headless-no-dkms-595-server-open", "nvidia-fabricmanager-595", "libnvidia-nscq-595"]
UBUNTU_JAMMY_580 = ["nvidia-utils-580-server", "libnvidia-compute-580-server", "nvidia-compute-utils-580-server",
                    "nvidia-headless-no-dkms-580-server", "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
DEBIAN = ["nvidia-smi", "libnvidia-ml1", "libcuda1"]
NODES = {
    # 580.178.04 (prepare.yml) upgraded to branch 595, which the lock resolves to one exact version.
    "nvidia_driver-ubuntu2404": {"source": "distro", "upstream": "595.112.07", "locked": UBUNTU_NOBLE_595,
                                 "held": UBUNTU_NOBLE_595, "fabric_manager": True, "flavour": "open",
                                 "gone": ["nvidia-fabricmanager-580", "libnvidia-nscq-580", "nvidia-utils-580-server",
                                          "libnvidia-compute-580-server", "nvidia-compute-utils-580-server",
                                          "nvidia-headless-no-dkms-580-server-open"]},
    "nvidia_driver-ubuntu2204": {"source": "distro", "upstream": "580.178.04", "locked": UBUNTU_JAMMY_580,
                                 "held": UBUNTU_JAMMY_580, "fabric_manager": True, "flavour": "proprietary",
                                 "gone": []},
    # The branch lock is resolved to one exact version and pinned at it (Fabric Manager must match).
    "nvidia_driver-debian13": {"source": "mirror", "upstream": "550.163.01", "locked": DEBIAN,
                               "held": DEBIAN + ["nvidia-persistenced"], "fabric_manager": False, "flavour": None,
                               "gone": []},
}


@pytest.fixture()
def node(host):
    return NODES[host.backend.get_hostname()]


def _dpkg(host, name):
    out = host.run("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' %s" % name)
    assert out.rc == 0, "%s is not known to dpkg: %s" % (name, out.stderr)
    version, status = out.stdout.split(" ", 1)
    return version, status.strip()


def test_driver_packages_installed_at_locked_version_and_held(host, node):
    for name in node["locked"]:
        version, status = _dpkg(host, name)
        assert status == "hi", "%s: dpkg status %r, want installed and held (hi)" % (name, status)
        assert version.split("-")[0] == node["upstream"], (name, version)


def test_packages_held(host, node):
    held = set(host.check_output("apt-mark showhold").split())
    assert set(node["held"]) <= held, "not held: %s" % (set(node["held"]) - held)


def test_apt_preferences_pin_the_lock(host, node):
    pref = host.file("/etc/apt/preferences.d/gpucloud-nvidia-driver.pref")
    assert pref.is_file and pref.mode == 0o644
    text = pref.content_string
    assert "Pin: version %s-*" % node["upstream"] in text
    assert "Pin-Priority: 1001" in text
    # apt itself reports the pin on the installed version
    policy = host.check_output("apt-cache policy %s" % node["locked"][0])
    assert re.search(r"\*\*\* %s-\S+ 1001" % re.escape(node["upstream"]), policy), policy


def test_nvidia_smi_is_the_installed_binary(host, node):
    assert host.file("/usr/bin/nvidia-smi").exists
    # No kernel module can be loaded in a container: nvidia-smi must say so, not succeed. In a
    # chroot it exits 9 "couldn't communicate with the NVIDIA driver" (TESTBED.md); in these lab
    # containers (no /dev/nvidia*, no /proc/driver/nvidia) it exits 255 "Failed to initialize
    # NVML: Unknown Error". acceptance.yml proves the collection's verify calls both "driver not loaded".
    run = host.run("nvidia-smi")
    answers = {9: "couldn't communicate with the NVIDIA driver", 255: "Failed to initialize NVML"}
    assert run.rc in answers and answers[run.rc] in run.stdout + run.stderr, (run.rc, run.stdout, run.stderr)
    assert not host.file("/proc/driver/nvidia/version").exists


def test_nvml_library_present(host, node):
    libs = host.check_output("ldconfig -p")
    assert "libnvidia-ml.so.1" in libs and "libcuda.so.1" in libs


def test_persistenced_unit_enabled_not_faked_running(host):
    svc = host.service("nvidia-persistenced")
    assert svc.is_enabled
    # Without a loaded driver the role must not pretend it started the daemon.
    assert not svc.is_running


def test_fabric_manager_unit_present_and_enabled(host, node):
    if not node["fabric_manager"]:
        pytest.skip("no Fabric Manager on this node")
    unit = host.run("systemctl list-unit-files --no-legend nvidia-fabricmanager.service")
    assert unit.stdout.startswith("nvidia-fabricmanager.service"), unit.stdout
    assert host.service("nvidia-fabricmanager").is_enabled
    assert not host.service("nvidia-fabricmanager").is_running


def test_no_kernel_module_packages_in_container(host):
    listed = host.run("dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 'nvidia-dkms-*' '*-kernel-dkms' "
                      "'*-kernel-open-dkms' dkms 'linux-modules-nvidia-*'").stdout
    installed = [line.split()[0] for line in listed.splitlines() if line.split()[1:2] == ["ii"]]
    assert installed == [], installed


def test_kernel_module_flavour_of_the_userspace(host, node):
    """Ubuntu's headless server driver names the flavour: its kernel source is open or proprietary."""
    if node["flavour"] is None:
        pytest.skip("Debian packages do not name the flavour in the userspace")
    branch = node["upstream"].split(".")[0]
    open_source = host.package("nvidia-kernel-source-%s-server-open" % branch).is_installed
    proprietary_source = host.package("nvidia-kernel-source-%s-server" % branch).is_installed
    assert (open_source, proprietary_source) == ((True, False) if node["flavour"] == "open" else (False, True))


def test_branch_upgrade_left_no_old_package_behind(host, node):
    for name in node["gone"]:
        assert not host.package(name).is_installed, "%s is still installed after the upgrade" % name
    leftovers = host.run("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' "
                         "'nvidia-fabricmanager*' 'libnvidia-nscq*'").stdout
    # "rc" (removed, its configuration kept) does not count: the packages are gone, the
    # operator's fabricmanager.cfg stays.
    fm_nscq = [line.split()[0] for line in leftovers.splitlines() if line.split()[2:3] in (["ii"], ["hi"])]
    wanted = [name for name in node["locked"] if "fabricmanager" in name or "nscq" in name]
    assert sorted(fm_nscq) == sorted(wanted), leftovers


def test_check_mode_predicted_the_upgrade(host, node):
    """The plan the `check` step reported (converge.yml kept it) is what the real run did."""
    if not node["gone"]:
        pytest.skip("no upgrade on this node")
    ephemeral = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
    hostname = host.backend.get_hostname()
    with open(os.path.join(ephemeral, "check-plan-%s.json" % hostname), encoding="utf-8") as handle:
        plan = json.load(handle)
    with open(os.path.join(ephemeral, "held-before-%s.json" % hostname), encoding="utf-8") as handle:
        held_before = set(json.load(handle))
    held_after = set(host.check_output("apt-mark showhold").split())
    assert plan["version"] == node["upstream"]
    assert sorted(plan["install"]) == sorted(node["locked"])
    assert set(plan["hold"]) == held_after
    # exactly the held packages the upgrade replaced, no more and no fewer
    assert sorted(plan["remove"]) == sorted(held_before - held_after) == sorted(node["gone"])


def test_distro_node_has_no_mirror(host, node):
    mirror = host.file("/etc/apt/sources.list.d/gpucloud-nvidia-mirror.sources")
    assert mirror.exists == (node["source"] == "mirror")


def test_mirror_node_installs_from_signed_loopback_repo(host, node):
    if node["source"] != "mirror":
        pytest.skip("distro node")
    sources = host.file("/etc/apt/sources.list.d/gpucloud-nvidia-mirror.sources").content_string
    assert "URIs: http://127.0.0.1:8088/" in sources
    assert "Signed-By: /etc/apt/keyrings/gpucloud-nvidia-mirror.asc" in sources
    assert "BEGIN PGP PUBLIC KEY BLOCK" in host.file("/etc/apt/keyrings/gpucloud-nvidia-mirror.asc").content_string
    # Debian's sources carry only main: the NVIDIA packages can only have come from the mirror.
    assert "Components: main\n" in host.file("/etc/apt/sources.list.d/debian.sources").content_string
    policy = host.check_output("apt-cache policy nvidia-smi")
    installed = policy.split("***", 1)[1].split("\n")
    assert any("http://127.0.0.1:8088" in line for line in installed[1:3]), policy
    # the repository really is signed: apt verified InRelease against the key
    lists = host.check_output("ls /var/lib/apt/lists/")
    assert "127.0.0.1:8088_._InRelease" in lists


def test_persistenced_drop_in_follows_the_packaged_unit(host, node):
    """A packaged unit with --no-persistence-mode gets the drop-in and runs without the flag."""
    fragment = host.check_output("systemctl show --property=FragmentPath --value nvidia-persistenced.service")
    packaged = host.file(fragment).content_string
    dropin = host.file("/etc/systemd/system/nvidia-persistenced.service.d/gpucloud-persistence.conf")
    effective = host.check_output("systemctl show --property=ExecStart --value nvidia-persistenced.service")
    if node["source"] == "distro":
        # Ubuntu's nvidia-compute-utils-<branch>-server unit starts the daemon with the flag.
        assert "--no-persistence-mode" in packaged
    if "--no-persistence-mode" in packaged:
        assert dropin.is_file and dropin.mode == 0o644
        assert "ExecStart=\n" in dropin.content_string
        assert "--no-persistence-mode" not in effective and "nvidia-persistenced" in effective
    else:
        assert not dropin.exists
