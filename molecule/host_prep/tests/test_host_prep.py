"""Verify host_prep on the nodes' real state, and the BMC emulator's real BIOS state."""
import json
import os
import re
import ssl
import urllib.request

import pytest

NOUVEAU_CONF = "/etc/modprobe.d/gpucloud-blacklist-nouveau.conf"
GRUB_FRAGMENT = "/etc/default/grub.d/90-gpucloud-host-prep.cfg"
SYSCTL_FILE = "/etc/sysctl.d/99-zz-gpucloud-host-prep.conf"
REASONS = "/run/gpucloud/reboot-reasons"
SUSHY_DIR = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"), "sushy")


def test_nouveau_blacklisted(host):
    f = host.file(NOUVEAU_CONF)
    assert f.is_file and f.user == "root" and f.mode == 0o644
    lines = f.content_string.splitlines()
    assert "blacklist nouveau" in lines
    assert "options nouveau modeset=0" in lines


def test_modprobe_sees_the_blacklist(host):
    config = host.check_output("modprobe --showconfig").splitlines()
    assert "blacklist nouveau" in config
    assert "options nouveau modeset=0" in config


def test_initramfs_rebuilt_with_the_blacklist(host):
    images = host.check_output("ls /boot/initrd.img-*").split()
    assert images, "prepare installed a kernel: an initramfs must exist"
    conf_mtime = host.file(NOUVEAU_CONF).mtime
    for image in images:
        assert host.file(image).mtime >= conf_mtime, image + " predates the blacklist"
        listing = host.check_output("lsinitramfs %s" % image).splitlines()
        assert NOUVEAU_CONF.lstrip("/") in listing, image
        inside = host.check_output(
            "d=$(mktemp -d) && cd $d && unmkinitramfs %s . >/dev/null && "
            "cat $(find . -path '*etc/modprobe.d/gpucloud-blacklist-nouveau.conf' | head -1); rm -rf $d" % image)
        assert "blacklist nouveau" in inside and "options nouveau modeset=0" in inside


def test_grub_fragment_sets_cmdline(host):
    f = host.file(GRUB_FRAGMENT)
    assert f.is_file and f.mode == 0o644
    value = host.check_output(
        "bash -c 'GRUB_CMDLINE_LINUX=\"quiet\"; . %s; echo \"$GRUB_CMDLINE_LINUX\"'" % GRUB_FRAGMENT)
    assert value.split() == ["quiet", "iommu=pt", "pci=realloc=off"]


def _sysctl_file(host):
    entries = {}
    for line in host.file(SYSCTL_FILE).content_string.splitlines():
        if line.strip() and not line.startswith("#"):
            key, dummy, value = line.partition("=")
            entries[key.strip()] = value.strip()
    return entries


@pytest.mark.parametrize("key,value", [
    ("vm.max_map_count", "1048576"),
    ("kernel.numa_balancing", "0"),
    ("kernel.yama.ptrace_scope", "1"),
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.conf.all.rp_filter", "2"),
    ("net.ipv4.conf.default.rp_filter", "2"),
    ("net.core.rmem_max", "268435456"),
    ("net.ipv4.tcp_rmem", "4096 87380 134217728"),
])
def test_sysctl_profile(host, key, value):
    assert _sysctl_file(host)[key] == value


def test_sysctl_file_is_applied_last_at_boot(host):
    # systemd's own reading of the sysctl.d directories on this image: the role's file comes
    # after every file the distribution ships (99-sysctl.conf, 99-protect-links.conf, ...), so
    # its values win at boot.
    listing = host.check_output("systemd-analyze cat-config sysctl.d")
    files = re.findall(r"^# (/\S+\.conf)$", listing, re.M)
    assert len(files) > 1 and files[-1] == SYSCTL_FILE, files


def test_memlock_unlimited_for_sessions(host):
    content = host.file("/etc/security/limits.d/90-gpucloud-memlock.conf").content_string
    rows = [line.split() for line in content.splitlines() if line and not line.startswith("#")]
    assert ["*", "soft", "memlock", "unlimited"] in rows
    assert ["*", "hard", "memlock", "unlimited"] in rows
    assert ["root", "hard", "memlock", "unlimited"] in rows


def test_memlock_unlimited_for_services(host):
    # The running manager re-executed with the drop-in: its default applies to new units.
    out = host.check_output("systemctl show --property DefaultLimitMEMLOCK")
    assert out == "DefaultLimitMEMLOCK=infinity"


def test_cpu_governor_unit_enabled(host):
    assert host.run("systemctl is-enabled gpucloud-cpu-governor.service").stdout.strip() == "enabled"
    unit = host.file("/etc/systemd/system/gpucloud-cpu-governor.service").content_string
    assert "echo performance >" in unit
    assert "ConditionPathExists=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor" in unit


def test_kernel_packages_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    installed = set(host.check_output(
        "dpkg-query -W -f='${binary:Package} ${Status}\\n' 'linux-image-*' | "
        "awk '$4 == \"installed\" {print $1}'").split())
    small_kernel = "linux-image-virtual" if host.system_info.distribution == "ubuntu" else "linux-image-cloud-amd64"
    assert small_kernel in installed
    assert installed and installed <= held, "not held: %s" % (installed - held)


def test_unattended_upgrades_blacklist(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    values = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)
    for pattern in ("^linux\\-", "^nvidia", "^libnvidia\\-", "^cuda\\-"):
        assert pattern in values, dump


def test_mokutil_installed(host):
    assert host.package("mokutil").is_installed


def test_reboot_reasons_recorded_until_reboot(host):
    # gpucloud.fleet.node_reboot's record: where update-notifier and kured look, and ours.
    assert host.file("/run/reboot-required").content_string == "*** System restart required ***\n"
    lines = host.file(REASONS).content_string.splitlines()
    assert all(line.startswith("host_prep: ") for line in lines), lines
    reasons = [line[len("host_prep: "):] for line in lines]
    assert "nouveau-blacklist" in reasons and "kernel-cmdline" in reasons
    has_bmc = host.backend.get_hostname() == "host-prep-debian12"
    assert ("bios-settings" in reasons) == has_bmc


def _bmc_get(path):
    port = open(os.path.join(SUSHY_DIR, "port")).read().strip()
    ctx = ssl.create_default_context(cafile=os.path.join(SUSHY_DIR, "cert.pem"))
    with urllib.request.urlopen("https://127.0.0.1:%s%s" % (port, path), context=ctx) as resp:
        return json.load(resp)


def test_bios_settings_pending_on_bmc():
    systems = _bmc_get("/redfish/v1/Systems")["Members"]
    assert len(systems) == 1
    bios = _bmc_get(systems[0]["@odata.id"] + "/BIOS")
    settings = _bmc_get(bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"])["Attributes"]
    assert settings["ProcTurboMode"] == "Disabled"
    assert str(settings["QuietBoot"]).lower() == "false"
    assert settings["BootMode"] == "Uefi"


def test_bios_patched_once_and_only_what_differed():
    # converge patched; idempotence, check mode and the unknown-attribute run did not.
    log = open(os.path.join(SUSHY_DIR, "emulator.log")).read()
    patches = re.findall(r'"\S*PATCH (\S+) HTTP', re.sub(r"\x1b\[[0-9;]*m", "", log))
    assert len(patches) == 1 and patches[0].endswith("/BIOS/Settings"), patches
    updated = re.findall(r'BIOS attributes "(.*)" updated', log)
    if updated:
        assert "BootMode" not in updated[0] and "ProcTurboMode" in updated[0]
