# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""sysctl_profile on captures of the lab containers and this machine (tests/fixtures/host_prep/)."""

import errno
import os
import shutil

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils.sysctl import (
    MISSING,
    ProcSys,
    SysctlProfileError,
    boot_order,
    canonical_key,
    check_settings,
    ensure,
    key_path,
    overridden_at_boot,
    parse_conf,
    parse_sysctl_a,
    plan,
    read_conf_dirs,
    render,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    ROOT,
    fixture_path,
    fixture_text,
)

PROFILE_FILE = "/etc/sysctl.d/99-zz-gpucloud-host-prep.conf"


def role_defaults():
    with open(os.path.join(ROOT, "roles", "host_prep", "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


def role_profile():
    """host_prep's default profile as validate.yml merges it (host_prep_fabric_multi_nic: true)."""
    defaults = role_defaults()
    profile = dict(defaults["host_prep_sysctl"])
    profile.update({"net.ipv4.conf.all.rp_filter": 2, "net.ipv4.conf.default.rp_filter": 2})
    profile.update(defaults["host_prep_sysctl_extra"])
    return profile


class CapturedProcSys:
    """/proc/sys as ``sysctl -a`` and ``find /proc/sys -writable`` saw it on one host; writes stick."""

    def __init__(self, name, fail=None):
        self.values = parse_sysctl_a(fixture_text("host_prep", "sysctl-a.%s.txt" % name))
        self.writable_paths = set(fixture_text("host_prep", "proc-sys-writable.%s.txt" % name).split())
        self.fail = fail or {}
        self.writes = []

    def read(self, key):
        return self.values.get(key)

    def writable(self, key):
        return "/proc/sys/" + key_path(key) in self.writable_paths

    def write(self, key, value):
        if not self.writable(key):
            raise OSError(errno.EROFS, "Read-only file system")
        if key in self.fail:
            raise OSError(self.fail[key], os.strerror(self.fail[key]))
        self.writes.append((key, value))
        self.values[key] = value


def lab_root(tmp_path, image):
    """A root with the image's real sysctl.d files (and merged /usr: lib -> usr/lib)."""
    root = tmp_path / image
    shutil.copytree(fixture_path("host_prep", "sysctl.d", image), str(root), symlinks=True)
    os.symlink("usr/lib", str(root / "lib"))
    return root


def test_parse_sysctl_a_joins_tab_separated_values():
    values = parse_sysctl_a(fixture_text("host_prep", "sysctl-a.debian12-container.txt"))
    assert values["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert values["vm.max_map_count"] == "1048576"
    assert len(values) > 900


@pytest.mark.parametrize("key,dotted,path", [
    ("vm.max_map_count", "vm.max_map_count", "vm/max_map_count"),
    # sysctl.d(5): the first separator is a slash, so the dot belongs to the VLAN name.
    ("net/ipv4/conf/eth0.100/rp_filter", "net.ipv4.conf.eth0/100.rp_filter", "net/ipv4/conf/eth0.100/rp_filter"),
    ("net.ipv4.conf.eth0/100.rp_filter", "net.ipv4.conf.eth0/100.rp_filter", "net/ipv4/conf/eth0.100/rp_filter"),
])
def test_keys_in_both_spellings(key, dotted, path):
    assert canonical_key(key) == dotted
    assert key_path(key) == path


def test_check_settings_renders_values_and_refuses_what_no_file_can_hold():
    assert check_settings({"net.ipv4.tcp_rmem": "4096\t87380  134217728", "net.ipv4.ip_forward": True}) == {
        "net.ipv4.tcp_rmem": "4096 87380 134217728", "net.ipv4.ip_forward": "1"}
    for bad in ({"vm.x": "1\nkernel.y = 2"}, {"vm x": 1}, {"vm.x": None}, {"vm.x": [1]}, {}):
        with pytest.raises(SysctlProfileError):
            check_settings(bad)


def test_render_then_parse_gives_the_profile_back_sorted():
    profile = role_profile()
    settings = check_settings(profile)
    text = render(settings, "line one\nline two")
    assert text.startswith("# line one\n# line two\n")
    entries = parse_conf(text)
    assert [entry[0] for entry in entries] == sorted(settings)
    assert dict(entries) == settings


def test_parse_conf_on_the_images_files():
    # Debian 12's /etc/sysctl.conf is all comments; pid-max sets one key.
    assert parse_conf(fixture_text("host_prep", "sysctl.d", "debian12", "etc", "sysctl.conf")) == []
    pid_max = parse_conf(fixture_text("host_prep", "sysctl.d", "debian13", "usr", "lib", "sysctl.d", "50-pid-max.conf"))
    assert pid_max == [("kernel.pid_max", "4194304")]
    protect = dict(parse_conf(fixture_text("host_prep", "sysctl.d", "debian12", "usr", "lib", "sysctl.d",
                                           "99-protect-links.conf")))
    assert protect["fs.protected_symlinks"] == "1"


def test_parse_conf_drops_the_ignore_failure_dash_and_keeps_globs():
    assert parse_conf("-net.ipv4.conf.*.rp_filter = 2\n; comment\nkernel/yama/ptrace_scope=1\nbogus\n") == [
        ("net.ipv4.conf.*.rp_filter", "2"), ("kernel.yama.ptrace_scope", "1")]


@pytest.mark.parametrize("image,before", [
    ("debian12", ["/usr/lib/sysctl.d/50-pid-max.conf", "/usr/lib/sysctl.d/99-protect-links.conf",
                  "/etc/sysctl.d/99-sysctl.conf"]),
    ("debian13", ["/usr/lib/sysctl.d/10-coredump-debian.conf", "/usr/lib/sysctl.d/50-pid-max.conf"]),
])
def test_role_default_file_is_applied_last_on_the_lab_images(tmp_path, image, before):
    defaults = role_defaults()
    listing = read_conf_dirs(root=str(lab_root(tmp_path, image)))[0]
    assert "/lib/sysctl.d" not in listing, "/lib is usr/lib: read once"
    assert boot_order(listing) == before
    directory, name = os.path.split(defaults["host_prep_sysctl_file"])
    listing.setdefault(directory, []).append(name)
    assert boot_order(listing) == before + [defaults["host_prep_sysctl_file"]]


def test_a_file_in_etc_hides_the_same_name_in_usr_lib():
    listing = {"/etc/sysctl.d": ["50-pid-max.conf"], "/usr/lib/sysctl.d": ["50-pid-max.conf", "99-a.conf"]}
    assert boot_order(listing) == ["/etc/sysctl.d/50-pid-max.conf", "/usr/lib/sysctl.d/99-a.conf"]


def test_overridden_at_boot_only_by_later_files_with_other_values():
    settings = {"vm.max_map_count": "1048576", "net.ipv4.conf.all.rp_filter": "2", "kernel.numa_balancing": "0"}
    order = ["/etc/sysctl.d/10-early.conf", PROFILE_FILE, "/etc/sysctl.d/99-zzz-a.conf", "/etc/sysctl.d/99-zzz-b.conf"]
    contents = {
        "/etc/sysctl.d/10-early.conf": "vm.max_map_count = 65530\n",
        "/etc/sysctl.d/99-zzz-a.conf": "vm.max_map_count = 65530\nnet.ipv4.conf.*.rp_filter = 1\nkernel.numa_balancing = 1\n",
        "/etc/sysctl.d/99-zzz-b.conf": "kernel.numa_balancing = 0\n",
    }
    assert overridden_at_boot(settings, PROFILE_FILE, order, contents) == {
        "vm.max_map_count": {"file": "/etc/sysctl.d/99-zzz-a.conf", "value": "65530"},
        "net.ipv4.conf.all.rp_filter": {"file": "/etc/sysctl.d/99-zzz-a.conf", "value": "1"},
    }


def test_plan_in_a_lab_container_refuses_what_differs_and_skips_what_matches():
    profile = role_profile()
    settings = check_settings(profile)
    proc = CapturedProcSys("debian12-container")
    apply, refused = plan(settings, dict((k, {"value": proc.read(k), "writable": proc.writable(k)}) for k in settings))
    assert apply == {}
    assert refused["kernel.yama.ptrace_scope"] == MISSING
    # Not namespaced: a container's network namespace has no such entry.
    assert refused["net.core.netdev_max_backlog"] == MISSING
    assert refused["net.core.rmem_max"] == "read-only here (is 4194304, profile 268435456)"
    assert refused["net.ipv4.tcp_rmem"] == "read-only here (is 4096 131072 33554432, profile 4096 87380 134217728)"
    # Already what the profile says: neither applied nor reported.
    for key in ("vm.max_map_count", "kernel.numa_balancing", "net.ipv4.ip_forward"):
        assert key not in refused


def test_plan_on_a_writable_kernel_applies_only_differing_values():
    profile = role_profile()
    settings = check_settings(profile)
    proc = CapturedProcSys("debian12-host")
    apply, refused = plan(settings, dict((k, {"value": proc.read(k), "writable": proc.writable(k)}) for k in settings))
    assert refused == {"kernel.yama.ptrace_scope": MISSING}
    assert apply["net.core.rmem_max"] == "268435456"
    assert apply["net.ipv4.conf.all.rp_filter"] == "2"
    assert "vm.max_map_count" not in apply and "net.ipv4.ip_forward" not in apply


def test_ensure_in_a_container_persists_everything_and_is_idempotent(tmp_path):
    profile = role_profile()
    root = lab_root(tmp_path, "debian12")
    proc = CapturedProcSys("debian12-container")
    check = ensure(profile, PROFILE_FILE, "c", True, True, proc, root=str(root))
    assert (check["changed"], check["file_changed"], check["applied"]) == (True, True, {})
    assert not (root / PROFILE_FILE.lstrip("/")).exists()

    first = ensure(profile, PROFILE_FILE, "c", True, False, proc, root=str(root))
    written = root / PROFILE_FILE.lstrip("/")
    assert first["changed"] and written.read_text() == render(check_settings(profile), "c")
    assert oct(written.stat().st_mode & 0o7777) == "0o644"
    assert first["boot_order"][-1] == PROFILE_FILE and first["overridden_at_boot"] == {}
    assert "net.core.rmem_max" in first["not_applied"] and proc.writes == []
    assert any("not in the running kernel" in warning for warning in first["warnings"])

    again = ensure(profile, PROFILE_FILE, "c", True, False, proc, root=str(root))
    assert (again["changed"], again["applied"]) == (False, {})
    assert again["not_applied"] == first["not_applied"]
    assert ensure(profile, PROFILE_FILE, "c", True, True, proc, root=str(root))["changed"] is False


def test_ensure_writes_through_the_given_writer_only_when_the_file_differs(tmp_path):
    profile = role_profile()
    root = lab_root(tmp_path, "debian12")
    proc = CapturedProcSys("debian12-container")
    calls = []

    def writer(path, text):
        calls.append(path)
        with open(path, "w") as handle:
            handle.write(text)

    ensure(profile, PROFILE_FILE, "c", True, True, proc, root=str(root), writer=writer)
    assert calls == []
    ensure(profile, PROFILE_FILE, "c", True, False, proc, root=str(root), writer=writer)
    assert calls == [str(root / PROFILE_FILE.lstrip("/"))]
    ensure(profile, PROFILE_FILE, "c", True, False, proc, root=str(root), writer=writer)
    assert len(calls) == 1


def test_ensure_on_a_writable_kernel_applies_then_changes_nothing(tmp_path):
    profile = role_profile()
    root = lab_root(tmp_path, "debian12")
    proc = CapturedProcSys("debian12-host")
    check = ensure(profile, PROFILE_FILE, "c", True, True, proc, root=str(root))
    assert check["applied"]["net.core.rmem_max"] == "268435456" and proc.writes == []
    assert "net.core.rmem_max = 4194304\n" in check["diff"][1]["before"]

    first = ensure(profile, PROFILE_FILE, "c", True, False, proc, root=str(root))
    assert first["applied"] == check["applied"]
    assert dict(proc.writes) == check["applied"]
    assert first["not_applied"] == {"kernel.yama.ptrace_scope": MISSING}

    again = ensure(profile, PROFILE_FILE, "c", True, False, proc, root=str(root))
    assert (again["changed"], again["applied"], len(proc.writes)) == (False, {}, len(check["applied"]))


def test_a_refused_write_is_reported_not_counted_as_applied(tmp_path):
    root = lab_root(tmp_path, "debian13")
    proc = CapturedProcSys("debian12-host", fail={"net.core.rmem_max": errno.EINVAL})
    result = ensure({"net.core.rmem_max": 268435456, "vm.max_map_count": 1048576}, PROFILE_FILE, "c", True, False,
                    proc, root=str(root))
    assert result["applied"] == {}
    assert result["not_applied"] == {"net.core.rmem_max": "write refused: Invalid argument"}
    assert result["changed"] is True  # the file was written


def test_apply_false_only_persists(tmp_path):
    root = lab_root(tmp_path, "debian13")
    proc = CapturedProcSys("debian12-host")
    result = ensure({"net.core.rmem_max": 268435456}, PROFILE_FILE, "c", False, False, proc, root=str(root))
    assert (result["applied"], result["not_applied"], proc.writes) == ({}, {}, [])


def test_ensure_warns_about_a_later_file_and_a_path_not_read_at_boot(tmp_path):
    root = lab_root(tmp_path, "debian13")
    (root / "etc/sysctl.d/99-zzz-local.conf").write_text("vm.max_map_count = 65530\n")
    proc = CapturedProcSys("debian13-container")
    result = ensure({"vm.max_map_count": 1048576}, PROFILE_FILE, "c", True, False, proc, root=str(root))
    assert result["overridden_at_boot"] == {
        "vm.max_map_count": {"file": "/etc/sysctl.d/99-zzz-local.conf", "value": "65530"}}
    assert any("win after a reboot" in warning for warning in result["warnings"])

    elsewhere = ensure({"vm.max_map_count": 1048576}, "/etc/gpucloud-sysctl.conf", "c", True, False, proc,
                       root=str(root))
    assert any("not applied at boot" in warning for warning in elsewhere["warnings"])


def test_ensure_fixes_the_mode_of_an_existing_file(tmp_path):
    root = lab_root(tmp_path, "debian13")
    proc = CapturedProcSys("debian13-container")
    ensure({"vm.max_map_count": 1048576}, PROFILE_FILE, "c", True, False, proc, root=str(root))
    written = root / PROFILE_FILE.lstrip("/")
    written.chmod(0o600)
    result = ensure({"vm.max_map_count": 1048576}, PROFILE_FILE, "c", True, False, proc, root=str(root))
    assert result["changed"] and oct(written.stat().st_mode & 0o7777) == "0o644"


def test_ensure_refuses_a_relative_path_and_a_missing_directory(tmp_path):
    proc = CapturedProcSys("debian13-container")
    with pytest.raises(SysctlProfileError, match="absolute"):
        ensure({"vm.max_map_count": 1}, "sysctl.d/x.conf", "c", True, True, proc, root=str(tmp_path))
    with pytest.raises(SysctlProfileError, match="does not exist"):
        ensure({"vm.max_map_count": 1}, PROFILE_FILE, "c", True, True, proc, root=str(tmp_path))


def test_proc_sys_reads_writes_and_reports_missing_keys(tmp_path):
    (tmp_path / "net/ipv4/conf/eth0.100").mkdir(parents=True)
    (tmp_path / "net/ipv4/tcp_rmem").write_text("4096\t131072\t33554432\n")
    proc = ProcSys(str(tmp_path))
    assert proc.read("net.ipv4.tcp_rmem") == "4096 131072 33554432"
    assert proc.read("kernel.yama.ptrace_scope") is None and not proc.writable("kernel.yama.ptrace_scope")
    proc.write("net.ipv4.conf.eth0/100.rp_filter", "2")
    assert (tmp_path / "net/ipv4/conf/eth0.100/rp_filter").read_text() == "2\n"


def test_proc_sys_reads_this_kernel():
    assert ProcSys().read("kernel.ostype") == "Linux"
