# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


from ansible_collections.gpucloud.fleet.plugins.modules import ib_info
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import FakeCommands, fixture_text, run_module

IBSTAT = "/usr/sbin/ibstat"
IBV_DEVINFO = "/usr/sbin/ibv_devinfo"


def fixture(kind, name):
    return fixture_text("public", kind, name + ".txt")


AZURE = fixture("ibstat", "azure-ndv4-a100-8x-cx6vf-hdr-ibpanic-gpud")
H100 = fixture("ibstat", "h100-node-8x-cx7-ndr-4x-cx6dx-eth-tabs-gpud")
A100_VM = fixture("ibstat", "a100-vm-9x-mt4126-roce-200g-gpud")
DEVINFO = fixture("ibv_devinfo", "cx6-hdr-1port-ib-ornl-bernie-linuxhpc")


def test_runs_ibstat_with_c_locale():
    commands = FakeCommands({IBSTAT: (0, H100, "")})
    result = run_module(ib_info, {}, commands=commands)
    assert "failed" not in result
    assert result["changed"] is False
    assert result["source"] == "ibstat"
    assert result["hca_count"] == 12
    assert result["hcas"]["mlx5_0"]["ports"]["1"]["rate"] == 400
    assert result["mismatches"] == []
    argv, environ = commands.calls[0]
    assert argv == [IBSTAT]
    assert environ["LC_ALL"] == "C"


def test_expect_passes():
    commands = FakeCommands({IBSTAT: (0, A100_VM, "")})
    args = {"expect": {"hca_count": 8, "ca_pattern": "mlx5_[1-8]", "rate": 200, "link_layer": "InfiniBand"}}
    result = run_module(ib_info, args, commands=commands)
    assert "failed" not in result
    assert result["hca_count"] == 9
    assert result["mismatches"] == []


def test_expect_lists_every_mismatch():
    commands = FakeCommands({IBSTAT: (0, H100, "")})
    args = {"expect": {"hca_count": 8, "rate": 400, "link_layer": "InfiniBand"}}
    result = run_module(ib_info, args, commands=commands)
    # An _info module reports every difference and never fails on one (issue 29, item 7): the
    # nccl_fabric role's assert judges (tests/unit/roles/test_nccl_fabric_check.py).
    assert "failed" not in result and "msg" not in result
    assert len(result["mismatches"]) == 1 + 12 + 4
    assert result["mismatches"][0].startswith("expected 8 HCA(s), found 12")
    assert "mlx5_1 port 1: rate is 100, expected 400.0" in result["mismatches"]
    assert result["hcas"]["mlx5_1"]["ca_type"] == "MT4125"


def test_partial_output_with_ibpanic_warns_and_parses():
    body, panic = AZURE.split("ibpanic")
    commands = FakeCommands({IBSTAT: (255, body, "ibpanic" + panic)})
    result = run_module(ib_info, {"expect": {"hca_count": 9}}, commands=commands)
    assert "failed" not in result
    assert result["hca_count"] == 8
    assert result["mismatches"] == [
        "expected 9 HCA(s), found 8 (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7)"]
    assert "ibstat exited with rc 255" in result["warnings"][0]
    assert "mlx5_8" in result["warnings"][0]


def test_no_rdma_stack_means_no_hcas():
    stderr = "ibpanic: [4242] main: can't list IB device names: (No such file or directory)\n"
    commands = FakeCommands({IBSTAT: (255, "", stderr)})
    result = run_module(ib_info, {}, commands=commands)
    assert "failed" not in result
    assert (result["hca_count"], result["hcas"]) == (0, {})
    assert "found no RDMA devices" in result["warnings"][0]


def test_no_hcas_and_empty_output():
    result = run_module(ib_info, {}, commands=FakeCommands({IBSTAT: (0, "", "")}))
    assert ("failed" in result, result["hca_count"]) == (False, 0)


def test_stderr_of_a_successful_run_is_a_warning():
    stderr = "ibwarn: [77] main: stat of IB device 'mlx5_9' failed\n"
    result = run_module(ib_info, {}, commands=FakeCommands({IBSTAT: (0, AZURE.split("ibpanic")[0], stderr)}))
    assert ("failed" in result, result["hca_count"]) == (False, 8)
    assert result["warnings"] == ["ibstat: ibwarn: [77] main: stat of IB device 'mlx5_9' failed"]


def test_command_failure_fails():
    commands = FakeCommands({IBSTAT: (1, "", "ibstat: error: something broke\n")})
    result = run_module(ib_info, {}, commands=commands)
    assert result["failed"] is True
    assert result["msg"] == "ibstat failed with rc 1: ibstat: error: something broke"
    assert result["rc"] == 1


def test_missing_binary_names_the_package():
    result = run_module(ib_info, {}, commands=FakeCommands({}))
    assert result["failed"] is True
    assert "ibstat not found" in result["msg"]
    assert "infiniband-diags" in result["msg"]


def test_missing_binary_tolerated():
    result = run_module(ib_info, {"fail_on_missing": False}, commands=FakeCommands({}))
    assert "failed" not in result
    assert (result["hca_count"], result["hcas"], result["mismatches"]) == (0, {}, [])


def test_missing_binary_tolerated_but_expectations_still_apply():
    result = run_module(ib_info, {"fail_on_missing": False, "expect": {"hca_count": 8}}, commands=FakeCommands({}))
    assert "failed" not in result
    assert result["mismatches"] == ["expected 8 HCA(s), found 0 (none)"]


def test_missing_ibv_devinfo_names_its_packages():
    result = run_module(ib_info, {"source": "ibv_devinfo"}, commands=FakeCommands({}))
    assert result["failed"] is True
    assert "ibverbs-utils" in result["msg"] and "libibverbs-utils" in result["msg"]


def test_ibv_devinfo_runs_verbose():
    commands = FakeCommands({IBV_DEVINFO: (0, DEVINFO, "")})
    result = run_module(ib_info, {"source": "ibv_devinfo", "expect": {"hca_count": 1}}, commands=commands)
    assert "failed" not in result
    assert commands.calls[0][0] == [IBV_DEVINFO, "-v"]
    assert result["hcas"]["mlx5_0"]["ports"]["1"]["state"] == "PORT_ACTIVE"
    assert result["hca_count"] == 1


def test_ibv_devinfo_without_devices():
    commands = FakeCommands({IBV_DEVINFO: (255, "", "No IB devices found\n")})
    result = run_module(ib_info, {"source": "ibv_devinfo"}, commands=commands)
    assert ("failed" in result, result["hca_count"]) == (False, 0)


def test_text_input_does_not_run_anything():
    commands = FakeCommands({IBSTAT: (0, "", "")})
    result = run_module(ib_info, {"text": AZURE, "expect": {"hca_count": 8, "rate": 200}}, commands=commands)
    assert "failed" not in result
    assert result["hca_count"] == 8
    assert commands.calls == []


def test_src_input(tmp_path):
    capture = tmp_path / "ibstat.txt"
    capture.write_text(A100_VM)
    result = run_module(ib_info, {"src": str(capture)})
    assert "failed" not in result
    assert result["hcas"]["mlx5_8"]["ports"]["1"]["base_lid"] == 1396


def test_src_missing(tmp_path):
    result = run_module(ib_info, {"src": str(tmp_path / "nope.txt")})
    assert result["failed"] is True
    assert result["msg"].startswith("could not read ")


def test_unparsable_text_fails():
    result = run_module(ib_info, {"text": "<html>502 Bad Gateway</html>"})
    assert result["failed"] is True
    assert result["msg"].startswith("could not parse ibstat output: ")


def test_check_mode_reports_the_same():
    commands = FakeCommands({IBSTAT: (0, AZURE, "")})
    result = run_module(ib_info, {}, check_mode=True, commands=commands)
    assert ("failed" in result, result["changed"], result["hca_count"]) == (False, False, 8)


def test_text_and_src_are_mutually_exclusive():
    result = run_module(ib_info, {"text": AZURE, "src": "/tmp/x"})
    assert result["failed"] is True
    assert "mutually exclusive" in result["msg"]


def test_ca_names_and_ca_pattern_are_mutually_exclusive():
    result = run_module(ib_info, {"text": AZURE, "expect": {"ca_names": ["mlx5_0"], "ca_pattern": "mlx5_0"}})
    assert result["failed"] is True
    assert "mutually exclusive" in result["msg"]


def test_invalid_pattern_fails_cleanly():
    result = run_module(ib_info, {"text": AZURE, "expect": {"ca_pattern": "mlx5_["}})
    assert result["failed"] is True
    assert result["msg"].startswith("invalid expect: ca_pattern")


# An empty capture fails; expectations with nothing to check are a mismatch (issue 15, item 17).
def test_empty_capture_fails(tmp_path):
    empty = tmp_path / "ibstat.txt"
    empty.write_text("\n")
    result = run_module(ib_info, {"src": str(empty)})
    assert result["failed"] is True and "is empty" in result["msg"]
    result = run_module(ib_info, {"text": "  ", "expect": {"rate": 200}})
    assert result["failed"] is True and result["msg"].startswith("text is empty")


def test_expectations_without_any_hca_are_a_mismatch():
    result = run_module(ib_info, {"expect": {"rate": 200}}, commands=FakeCommands({IBSTAT: (0, "", "")}))
    assert "failed" not in result
    assert result["mismatches"][0].startswith("no HCA found at all")
