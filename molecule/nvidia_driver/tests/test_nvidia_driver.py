"""Verify gpucloud.fleet.nvidia_driver on the lab nodes' real package, apt and unit state."""
import re

import pytest

# Debian 12 (distro source, exact version lock) and Debian 13 (signed loopback mirror,
# branch lock), as molecule.yml and converge.yml set them up.
NODES = {
    "nvidia_driver-debian12": {"source": "distro", "upstream": "535.261.03", "pin": "535.261.03-*"},
    # The branch lock is resolved to one exact version and pinned at it (Fabric Manager must match).
    "nvidia_driver-debian13": {"source": "mirror", "upstream": "550.163.01", "pin": "550.163.01-*"},
}
LOCKED = ["nvidia-smi", "libnvidia-ml1", "libcuda1"]
HELD = LOCKED + ["nvidia-persistenced"]


@pytest.fixture()
def node(host):
    return NODES[host.backend.get_hostname()]


def _dpkg(host, name):
    out = host.run("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' %s" % name)
    assert out.rc == 0, "%s is not known to dpkg: %s" % (name, out.stderr)
    version, status = out.stdout.split(" ", 1)
    return version, status.strip()


@pytest.mark.parametrize("name", LOCKED)
def test_driver_packages_installed_at_locked_version(host, node, name):
    version, status = _dpkg(host, name)
    assert status == "hi", "%s: dpkg status %r, want installed and held (hi)" % (name, status)
    assert version.split("-")[0] == node["upstream"]


def test_packages_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    assert set(HELD) <= held, "not held: %s" % (set(HELD) - held)


def test_apt_preferences_pin_the_lock(host, node):
    pref = host.file("/etc/apt/preferences.d/gpucloud-nvidia-driver.pref")
    assert pref.is_file and pref.mode == 0o644
    text = pref.content_string
    assert "Pin: version %s" % node["pin"] in text
    assert "Pin-Priority: 1001" in text
    # apt itself reports the pin on the installed version
    policy = host.check_output("apt-cache policy nvidia-smi")
    assert re.search(r"\*\*\* %s-\S+ 1001" % re.escape(node["upstream"]), policy), policy


def test_nvidia_smi_is_the_installed_binary(host, node):
    smi = host.file("/usr/bin/nvidia-smi")
    assert smi.exists
    # No kernel module can be loaded in a container: nvidia-smi must say so, not succeed.
    run = host.run("nvidia-smi")
    assert run.rc != 0
    assert not host.file("/proc/driver/nvidia/version").exists


def test_nvml_library_present(host, node):
    libs = host.check_output("ldconfig -p")
    assert "libnvidia-ml.so.1" in libs and "libcuda.so.1" in libs


def test_persistenced_unit_enabled_not_faked_running(host):
    svc = host.service("nvidia-persistenced")
    assert svc.is_enabled
    # Without a loaded driver the role must not pretend it started the daemon.
    assert not svc.is_running


def test_no_kernel_module_packages_in_container(host):
    for name in ("nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "dkms"):
        assert not host.package(name).is_installed, name


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


def test_persistenced_drop_in_follows_the_packaged_unit(host):
    """A packaged unit with --no-persistence-mode gets the drop-in and runs without the flag."""
    fragment = host.check_output("systemctl show --property=FragmentPath --value nvidia-persistenced.service")
    packaged = host.file(fragment).content_string
    dropin = host.file("/etc/systemd/system/nvidia-persistenced.service.d/gpucloud-persistence.conf")
    effective = host.check_output("systemctl show --property=ExecStart --value nvidia-persistenced.service")
    if "--no-persistence-mode" in packaged:
        assert dropin.is_file and dropin.mode == 0o644
        assert "ExecStart=\n" in dropin.content_string
        assert "--no-persistence-mode" not in effective and "nvidia-persistenced" in effective
    else:
        assert not dropin.exists
