# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MIG layouts against mig-parted v0.15.0 and real nvidia-smi output.

Captures: the H200 host's own ``nvidia-smi mig -lgip`` and ``-q -x`` (MIG disabled),
a published H100 80GB ``-lgip``, NVIDIA's cloud-native-docs ``-lgi`` of an A100 40GB in
all-1g.5gb, netdata's ``-q -x`` of an A100-SXM4-40GB with MIG on and two MIG devices, and
mig-parted's own example and default configs (tests/fixtures/public/mig-parted).
"""


import copy
import json
import os

import jsonschema
import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout as m
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_text

SCHEMA = os.path.join(ROOT, "roles", "gpu_sharing", "files", "schemas", "mig-parted-config-v1.schema.json")
H200_LGIP = "h200-ubuntu2404-driver580/nvidia-smi_mig_-lgip.txt"
H200_XML = "h200-ubuntu2404-driver580/nvidia-smi_-q_-x.xml"
H100_LGIP = "public/mig/h100-80gb-lgip-jbarrow.txt"
A100_LGI = "public/mig/a100-pcie-40gb-lgi-all-1g.5gb-cloud-native-docs.txt"
A100_XML = "public/smi_xml/a100-sxm4-40gb-mig-510-v11-netdata-reindented.txt"

A100_80 = {"name": "a100_80g_pcie", "gpu_model": "A100 80GB PCIe",
           "mig": {"strategy": "single", "layout": "all-1g.10gb"}}


def validator():
    with open(SCHEMA) as handle:
        schema = json.load(handle)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def upstream_accepts(config):
    """What mig-parted v0.15.0's parse refuses (api/spec/v1/spec.go lines 47-181,
    pkg/types/mig_config.go 40-59), and nothing more: the lenient baseline."""
    if set(config) - {"version", "mig-configs"} or config.get("version") != "v1":
        return False
    for entries in config["mig-configs"].values():
        for entry in entries:
            if set(entry) - {"device-filter", "devices", "mig-enabled", "mig-devices"}:
                return False
            if "devices" not in entry or "mig-enabled" not in entry:
                return False
            if entry["mig-enabled"] and "mig-devices" not in entry:
                return False
            # device-filter: any string or list of strings; a bad one is dropped at match time
            # (helpers.go line 40), not refused.
    return True


# --- families and layouts ------------------------------------------------------------------

@pytest.mark.parametrize("name, pci, family", [
    ("NVIDIA H200", "233510DE", "H200-141GB"),          # the H200 capture's own XML
    ("NVIDIA A100-SXM4-40GB", "20B010DE", "A100-40GB"),  # netdata's capture
    ("A100 80GB PCIe", None, "A100-80GB"),              # the example profile's gpu_model
    ("NVIDIA A100-SXM4-80GB", None, "A100-80GB"),
    ("NVIDIA H100 80GB HBM3", None, "H100-80GB"),
    ("NVIDIA H100 NVL", None, None),                    # 94 GB: other profiles, not known here
    ("NVIDIA L4", None, None),
    ("something", "0x20B510DE", "A100-80GB"),           # the PCI ID wins
])
def test_family_of(name, pci, family):
    assert m.family_of(name, pci) == family


def test_profiles_match_the_real_lgip_tables():
    """Our per-family profile tables are exactly what the real -lgip captures list (name and Total)."""
    h200 = {row["profile"]: row["total"] for row in m.parse_lgip(fixture_text(H200_LGIP))}
    h100 = {row["profile"]: row["total"] for row in m.parse_lgip(fixture_text(H100_LGIP))}
    assert h200 == m.profiles_of("H200-141GB")
    assert h100 == m.profiles_of("H100-80GB")
    assert h200["3g.71gb"] == 2 and h200["7g.141gb"] == 1


def test_profiles_match_mig_parted_default_config():
    """all-<profile> counts agree with mig-parted v0.15.0 deployments/systemd/config-default.yaml."""
    config = yaml.safe_load(fixture_text("public/mig-parted/config-default.yaml.txt"))["mig-configs"]
    assert config["all-1g.10gb"][0]["mig-devices"] == {"1g.10gb": 7}   # 80GB A100/H100 entry
    assert "0x20B510DE" in config["all-1g.10gb"][0]["device-filter"]    # A100 80GB PCIe
    assert config["all-1g.10gb"][1]["mig-devices"] == {"1g.10gb": 4}   # 40GB entry
    assert m.layout_devices("all-1g.10gb", "A100-80GB") == {"1g.10gb": 7}
    assert m.layout_devices("all-1g.10gb", "A100-40GB") == {"1g.10gb": 4}
    assert m.layout_devices("all-1g.18gb", "H200-141GB") == config["all-1g.18gb"][0]["mig-devices"]
    assert m.layout_devices("all-3g.71gb", "H200-141GB") == config["all-3g.71gb"][0]["mig-devices"]
    h200_balanced = [e for e in config["all-balanced"] if "0x233510DE" in e.get("device-filter", [])]
    assert m.layout_devices("all-balanced", "H200-141GB") == h200_balanced[0]["mig-devices"]
    assert m.layout_devices("all-1g.18gb.me", "H200-141GB") == {"1g.18gb+me": 1}


@pytest.mark.parametrize("layout, family, message", [
    ("all-1g.10gb", "H200-141GB", "H200-141GB has no MIG profile 1g.10gb"),
    ("all-3g.71gb", "A100-80GB", "no MIG profile 3g.71gb"),
    ("seven-slices", "A100-80GB", "is not all-disabled"),
])
def test_layout_refused(layout, family, message):
    with pytest.raises(m.MigLayoutError, match=message):
        m.layout_devices(layout, family)


def test_devices_must_fit_the_gpu():
    m.check_devices_fit({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, "A100-80GB")
    with pytest.raises(m.MigLayoutError, match="compute"):
        m.check_devices_fit({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "A100-80GB")
    with pytest.raises(m.MigLayoutError, match="at most 2 x 3g.71gb"):
        m.check_devices_fit({"3g.71gb": 3}, "H200-141GB")


def test_desired_layout_from_profile_keys():
    assert m.desired_layout({"mig": False}, "H200-141GB") == {
        "name": "all-disabled", "enabled": False, "devices": {}, "strategy": "none"}
    want = m.desired_layout(A100_80, "A100-80GB")
    assert want == {"name": "all-1g.10gb", "enabled": True, "devices": {"1g.10gb": 7}, "strategy": "single"}


@pytest.mark.parametrize("mig, message", [
    ({"strategy": "single"}, "mig.layout must name"),
    ({"strategy": "single", "layout": "all-balanced"}, "single needs one MIG profile"),
    ({"strategy": "mixed", "layout": "all-1g.10gb", "profiles": ["2g.20gb"]}, "does not create"),
    ({"strategy": "mixed", "layout": "all-1g.10gb", "geometry": "x"}, "unknown key"),
    ({"strategy": "maybe", "layout": "all-1g.10gb"}, "mig.strategy must be one of"),
    ({"strategy": "single", "layout": "all-disabled"}, "write mig: false"),
    (True, "mig must be false or"),
])
def test_desired_layout_refusals_name_the_key(mig, message):
    with pytest.raises(m.MigLayoutError, match=message):
        m.desired_layout({"name": "p", "mig": mig}, "A100-80GB")


# --- the mig-parted config and the schema --------------------------------------------------

def test_generated_config_passes_schema_and_parses_like_upstream():
    config = m.mig_parted_config(A100_80, "A100-80GB")
    assert config == {"version": "v1", "mig-configs": {"all-1g.10gb": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
    validator().validate(config)
    assert yaml.safe_load(m.render_mig_parted_config(config)) == config
    disabled = m.mig_parted_config({"mig": False}, "H200-141GB")
    validator().validate(disabled)
    assert yaml.safe_load(m.render_mig_parted_config(disabled)) == disabled


@pytest.mark.parametrize("name", ["examples-config.yaml.txt", "config-default.yaml.txt"])
def test_schema_accepts_nvidias_own_configs(name):
    config = yaml.safe_load(fixture_text("public/mig-parted/" + name))
    assert not list(validator().iter_errors(config))
    assert m.validate_mig_parted_config(config)


def _default_with(mutate):
    config = copy.deepcopy(yaml.safe_load(fixture_text("public/mig-parted/config-default.yaml.txt")))
    mutate(config["mig-configs"])
    return config


TYPOS = {
    # One letter wrong in the H200 device ID: upstream's ParseUint fails, the error is dropped
    # (helpers.go line 40), the entry matches no GPU and the H200s keep their old layout.
    "device-filter typo": lambda c: c["all-balanced"][7].__setitem__("device-filter", ["0x2335l0DE", "0x233B10DE"]),
    "device index twice": lambda c: c["all-1g.18gb"][0].__setitem__("devices", [0, 1, 1]),
    # An empty filter is no filter (helpers.go lines 27-30): the H200-only entry hits every GPU.
    "device-filter emptied": lambda c: c["all-1g.35gb"][0].__setitem__("device-filter", ""),
}


@pytest.mark.parametrize("typo", sorted(TYPOS))
def test_a_typo_upstream_parses_is_refused_here(typo):
    config = _default_with(TYPOS[typo])
    assert upstream_accepts(config)
    assert list(validator().iter_errors(config)), typo
    with pytest.raises(m.MigLayoutError):
        m.validate_mig_parted_config(config)


@pytest.mark.parametrize("bad", [
    {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True}]}},
    {"version": "v2", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False}]}},
    {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enable": True, "mig-devices": {}}]}},
    {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 1}}]}},
    {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 0}}]}},
    {"version": "v1", "mig-configs": {"x": [{"devices": "some", "mig-enabled": False}]}},
    {"version": "v1", "mig-configs": {"x": []}},
    {"version": "v1", "mig-config": {}},
])
def test_schema_and_python_refuse_what_upstream_refuses(bad):
    assert list(validator().iter_errors(bad))
    with pytest.raises(m.MigLayoutError):
        m.validate_mig_parted_config(bad)


def test_family_check_refuses_a_profile_of_another_gpu():
    config = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"1g.10gb": 7}}]}}
    assert not list(validator().iter_errors(config))
    m.validate_mig_parted_config(config, "A100-80GB")
    with pytest.raises(m.MigLayoutError, match="H200-141GB has no MIG profile 1g.10gb"):
        m.validate_mig_parted_config(config, "H200-141GB")


# --- parsers on real output ----------------------------------------------------------------

def test_parse_lgip_h200_capture():
    rows = m.parse_lgip(fixture_text(H200_LGIP))
    assert [r["profile"] for r in rows] == ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb",
                                            "4g.71gb", "7g.141gb"]
    assert rows[0] == {"gpu": 0, "profile": "1g.18gb", "id": 19, "free": 7, "total": 7, "memory_gib": 16.0}
    assert rows[-1]["id"] == 0 and rows[-1]["memory_gib"] == 140.0


def test_parse_lgi_nvidia_docs_capture():
    rows = m.parse_lgi(fixture_text(A100_LGI))
    assert len(rows) == 7
    assert {r["profile"] for r in rows} == {"1g.5gb"}
    assert [r["instance_id"] for r in rows] == list(range(7, 14))
    assert [(r["start"], r["size"]) for r in rows] == [(i, 1) for i in range(7)]


def test_parsers_refuse_what_is_not_their_table():
    with pytest.raises(m.MigLayoutError, match="not an `nvidia-smi mig -lgi` table"):
        m.parse_lgi(fixture_text(H200_LGIP))
    with pytest.raises(m.MigLayoutError, match="-lgip"):
        m.parse_lgip("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert m.parse_lgi("No MIG-enabled devices found.") == []


def test_parse_smi_xml_h200_mig_disabled():
    gpus = m.parse_smi_xml(fixture_text(H200_XML))
    assert gpus == [{"index": 0, "name": "NVIDIA H200", "pci_bus_id": "00000000:00:06.0",
                     "uuid": "GPU-4fc604de-9030-742c-d69f-594418e871d5", "minor_number": 0,
                     "pci_device_id": "233510DE", "family": "H200-141GB",
                     "mig_current": False, "mig_pending": False, "mig_devices": 0}]


def test_parse_smi_xml_a100_mig_enabled():
    gpus = m.parse_smi_xml(fixture_text(A100_XML))
    assert len(gpus) == 1
    assert gpus[0]["family"] == "A100-40GB"
    assert gpus[0]["mig_current"] is True and gpus[0]["mig_pending"] is True
    assert gpus[0]["mig_devices"] == 2


def test_parse_compute_apps():
    assert m.parse_compute_apps("") == []
    assert m.parse_compute_apps("12345, python3, GPU-4fc604de-9030-742c-d69f-594418e871d5\n") == [
        {"pid": "12345", "name": "python3", "gpu_uuid": "GPU-4fc604de-9030-742c-d69f-594418e871d5"}]


# --- compare and plan ----------------------------------------------------------------------

H200_MIG = {"name": "h200_sxm", "gpu_model": "H200", "mig": {"strategy": "single", "layout": "all-3g.71gb"}}
A100_40_1G = {"name": "a100_40", "mig": {"strategy": "single", "layout": "all-1g.5gb"}}


def test_h200_capture_matches_mig_false_and_not_a_layout():
    gpus = m.parse_smi_xml(fixture_text(H200_XML))
    assert m.compare({"mig": False}, gpus)["matches"] is True
    judged = m.compare(H200_MIG, gpus)
    assert judged["matches"] is False
    assert judged["gpus"][0]["mode_change"] is True
    assert "MIG mode pending disabled, want enabled" in judged["gpus"][0]["reasons"]
    # Mode first; no instance commands until the mode is current.
    assert m.plan_nvidia_smi(judged) == [["nvidia-smi", "-i", "0", "-mig", "1"]]


def test_pending_mode_needs_a_reset_and_plans_nothing():
    gpus = [dict(m.parse_smi_xml(fixture_text(H200_XML))[0], mig_pending=True)]
    judged = m.compare(H200_MIG, gpus)
    assert judged["gpus"][0]["reset_required"] is True
    assert judged["gpus"][0]["mode_change"] is None
    assert m.plan_nvidia_smi(judged) == []


def test_a100_docs_capture_matches_all_1g5gb():
    gpus = [{"index": 0, "name": "NVIDIA A100-PCIE-40GB", "family": "A100-40GB", "mig_current": True,
             "mig_pending": True, "mig_devices": 7}]
    instances = m.parse_lgi(fixture_text(A100_LGI))
    judged = m.compare(A100_40_1G, gpus, instances)
    assert judged["matches"] is True and judged["layout"] == "all-1g.5gb"
    assert m.plan_nvidia_smi(judged) == []
    other = m.compare({"mig": {"strategy": "single", "layout": "all-3g.20gb"}}, gpus, instances)
    assert other["gpus"][0]["reasons"] == ["GPU instances 7 x 1g.5gb, want 2 x 3g.20gb"]
    assert m.plan_nvidia_smi(other) == [
        ["nvidia-smi", "mig", "-i", "0", "-dci"],
        ["nvidia-smi", "mig", "-i", "0", "-dgi"],
        ["nvidia-smi", "mig", "-i", "0", "-cgi", "3g.20gb,3g.20gb", "-C"],
    ]


def test_netdata_capture_two_mig_devices_judged_by_count_without_lgi():
    gpus = m.parse_smi_xml(fixture_text(A100_XML))
    assert m.compare({"mig": {"strategy": "single", "layout": "all-3g.20gb"}}, gpus)["matches"] is True
    judged = m.compare(A100_40_1G, gpus)
    assert judged["gpus"][0]["reasons"] == ["2 MIG device(s), want 7 (7 x 1g.5gb)"]


def test_plan_refuses_profiles_the_gpu_does_not_list():
    gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "family": "H100-80GB", "mig_current": True,
             "mig_pending": True, "mig_devices": 0}]
    judged = m.compare({"mig": {"strategy": "mixed", "layout": "all-balanced"}}, gpus, [])
    lgip = m.parse_lgip(fixture_text(H100_LGIP))
    assert m.plan_nvidia_smi(judged, lgip) == [
        ["nvidia-smi", "mig", "-i", "0", "-cgi", "3g.40gb,2g.20gb,1g.10gb,1g.10gb", "-C"]]
    with pytest.raises(m.MigLayoutError, match="does not list MIG profile"):
        m.plan_nvidia_smi(judged, [dict(row, gpu=1) for row in lgip])


def test_unknown_gpu_with_mig_wanted_fails():
    judged = m.compare(A100_80, [{"index": 0, "name": "NVIDIA L4", "family": None, "mig_current": None,
                                  "mig_pending": None, "mig_devices": 0}])
    assert judged["matches"] is False
    assert "not a MIG GPU" in judged["gpus"][0]["reasons"][0]


# --- ensure(): the module's logic with a stand-in for the commands -----------------------------

class FakeHost:
    """Answers nvidia-smi from the real H200 capture; MIG mode changes edit its <pending_mig>."""

    def __init__(self, apps=""):
        self.xml = fixture_text(H200_XML)
        self.apps = apps
        self.ran = []

    def __call__(self, argv):
        self.ran.append(" ".join(argv))
        if argv == m.SMI_XML:
            return 0, self.xml, ""
        if argv == m.SMI_APPS:
            return 0, self.apps, ""
        if argv == m.SMI_LGIP:
            return 0, fixture_text(H200_LGIP), ""
        if argv[:3] == ["nvidia-smi", "-i", "0"] and argv[3] == "-mig":
            state = "Enabled" if argv[4] == "1" else "Disabled"
            self.xml = self.xml.replace("<pending_mig>Disabled</pending_mig>", "<pending_mig>%s</pending_mig>" % state)
            return 0, "Enabled MIG Mode for GPU 00000000:00:00.0\nAll done.\n", ""
        return 1, "", "unexpected command %s" % argv


def test_ensure_changes_nothing_when_the_layout_matches():
    host = FakeHost()
    result = m.ensure(host, {"mig": False})
    assert result["changed"] is False and result["commands"] == []
    assert host.ran == ["nvidia-smi -q -x"]


def test_ensure_refuses_while_compute_processes_run():
    host = FakeHost(apps="4242, python3, GPU-5ba1b27a-2a3d-4b10-8c2e-8f2d2e3c9d61\n")
    with pytest.raises(m.MigLayoutError, match="refusing to change the MIG layout to all-3g.71gb while 1 compute"):
        m.ensure(host, H200_MIG)
    assert not any("-mig" in command for command in host.ran)
    assert m.ensure(host, H200_MIG, allow_busy=True, check_mode=True)["changed"] is True


def test_ensure_check_mode_reports_and_runs_nothing():
    host = FakeHost()
    result = m.ensure(host, H200_MIG, check_mode=True)
    assert result["changed"] is True
    assert result["commands"] == ["nvidia-smi -i 0 -mig 1"]
    assert not any("-mig" in command for command in host.ran)


def test_ensure_sets_the_mode_and_reports_the_reset_it_needs():
    host = FakeHost()
    result = m.ensure(host, H200_MIG)
    assert result["changed"] is True
    assert result["commands"] == ["nvidia-smi -i 0 -mig 1"]
    assert result["reset_required"] is True
    # A second run finds the mode pending: nothing to run, still waiting for the reset.
    again = m.ensure(host, H200_MIG)
    assert again["changed"] is False and again["reset_required"] is True


def test_ensure_with_mig_parted_runs_apply():
    host = FakeHost()
    result = m.ensure(host, H200_MIG, tool="mig-parted", config_file="/etc/gpucloud/mig-parted.yaml",
                      config_name="all-3g.71gb", check_mode=True)
    # A mode change: the mode alone, never a GPU reset (persistenced, DCGM and Fabric Manager hold
    # the GPUs; the pending mode is left for the shared reboot).
    assert result["commands"] == [
        "nvidia-mig-parted apply --mode-only --skip-reset -f /etc/gpucloud/mig-parted.yaml -c all-3g.71gb"]


class FakeMigPartedHost(FakeHost):
    """mig-parted on the H200 capture: a mode change stays pending (the GPU is held); a reset is refused."""

    def __call__(self, argv):
        if argv[:2] == ["nvidia-mig-parted", "apply"]:
            self.ran.append(" ".join(argv))
            if "--skip-reset" not in argv:
                return 1, "", "error resetting all GPUs: In use by another client"
            if "--mode-only" in argv:
                self.xml = self.xml.replace("<pending_mig>Disabled</pending_mig>", "<pending_mig>Enabled</pending_mig>")
                return 0, "MIG configuration applied successfully\n", ""
            if "<current_mig>Enabled</current_mig>" not in self.xml:
                return 1, "", "error applying MIG configuration: MIG mode pending"
            self.lgi = True
            return 0, "MIG configuration applied successfully\n", ""
        if argv == m.SMI_LGI:
            self.ran.append(" ".join(argv))
            rows = "".join("|   0  MIG 3g.71gb          9        %d          %d:4     |\n" % (i, 4 * (i - 1))
                           for i in (1, 2)) if getattr(self, "lgi", False) else ""
            return 0, ("+---+\n| GPU instances:                                     |\n"
                       "| GPU   Name          Profile  Instance   Placement  |\n" + rows), ""
        return super().__call__(argv)


def test_mig_parted_mode_change_stays_pending_for_the_shared_reboot():
    host = FakeMigPartedHost()
    args = dict(tool="mig-parted", config_file="/etc/gpucloud/mig-parted.yaml", config_name="all-3g.71gb")
    result = m.ensure(host, H200_MIG, **args)
    assert result["changed"] is True and result["reset_required"] is True
    assert result["commands"] == [
        "nvidia-mig-parted apply --mode-only --skip-reset -f /etc/gpucloud/mig-parted.yaml -c all-3g.71gb"]
    # After the reboot the mode is current and the instances are made, still without a reset.
    host.xml = host.xml.replace("<current_mig>Disabled</current_mig>", "<current_mig>Enabled</current_mig>")
    after = m.ensure(host, H200_MIG, **args)
    assert after["commands"] == ["nvidia-mig-parted apply --skip-reset -f /etc/gpucloud/mig-parted.yaml -c all-3g.71gb"]
    assert after["after"]["matches"] is True and after["reset_required"] is False
    assert m.ensure(host, H200_MIG, **args)["changed"] is False


# --- GPU identity: nvidia-smi's index, not the minor number (issue 28 item 7) ---------------------

PERMUTED_XML = "derived/h200-4gpu-minor-permuted-q-x.xml"
H200_ALL_3G = {"name": "h200_mig", "gpu_model": "H200", "mig": {"strategy": "single", "layout": "all-3g.71gb"}}


def test_parse_smi_xml_indexes_follow_nvidia_smis_order_not_minor_numbers():
    gpus = m.parse_smi_xml(fixture_text(PERMUTED_XML))
    # Document order is nvidia-smi's index order (PCI bus order); the minor numbers are 2, 3, 0, 1.
    assert [gpu["index"] for gpu in gpus] == [0, 1, 2, 3]
    assert [gpu["pci_bus_id"] for gpu in gpus] == ["00000000:18:00.0", "00000000:2A:00.0",
                                                   "00000000:3A:00.0", "00000000:5D:00.0"]
    assert [gpu["minor_number"] for gpu in gpus] == [2, 3, 0, 1]
    assert [gpu["mig_current"] for gpu in gpus] == [True, False, True, True]


def test_mig_commands_target_the_gpu_nvidia_smi_calls_by_that_index():
    gpus = m.parse_smi_xml(fixture_text(PERMUTED_XML))
    judged = m.compare(H200_ALL_3G, gpus, [])
    bad = [gpu["index"] for gpu in judged["gpus"] if gpu["mode_change"]]
    assert bad == [1]
    lgip = [dict(row, gpu=i) for i in range(4) for row in m.parse_lgip(fixture_text(H200_LGIP))]
    plan = m.plan_nvidia_smi(judged, lgip)
    # The GPU with MIG off is nvidia-smi's GPU 1 (bus 2A, minor 3): the mode command names 1,
    # and the instances go to 0, 2 and 3 as nvidia-smi numbers them (its -lgi "GPU" column).
    assert ["nvidia-smi", "-i", "1", "-mig", "1"] in plan
    assert ["nvidia-smi", "-i", "3", "-mig", "1"] not in plan
    made = sorted(argv[3] for argv in plan if "-cgi" in argv)
    assert made == ["0", "2", "3"]


# --- end anchors: a trailing newline is not part of a valid name ----------------------------------

@pytest.mark.parametrize("layout", ["all-1g.10gb\n", "all-1g.10gb.me\n", "all-balanced\n", "all-enabled\n"])
def test_layout_names_with_a_trailing_newline_are_refused(layout):
    with pytest.raises(m.MigLayoutError):
        m.layout_devices(layout, "A100-80GB")
    with pytest.raises(m.MigLayoutError):
        m.desired_layout({"name": "p", "mig": {"strategy": "single", "layout": layout}}, "A100-80GB")


@pytest.mark.parametrize("entry", [
    {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb\n": 7}},
    {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}, "device-filter": "0x20B510DE\n"},
])
def test_config_fields_with_a_trailing_newline_are_refused(entry):
    with pytest.raises(m.MigLayoutError):
        m.validate_mig_parted_config({"version": "v1", "mig-configs": {"all-1g.10gb": [entry]}})
