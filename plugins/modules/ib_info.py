#!/usr/bin/python
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: ib_info
short_description: Report InfiniBand/RoCE HCAs and how they differ from an expected fabric state
version_added: 0.1.0
author:
  - gpucloud.fleet contributors (@gpucloud)
description:
  - Runs C(ibstat) (or C(ibv_devinfo -v)) on the host, or parses output captured earlier,
    and returns every HCA with its ports as structured data.
  - With O(expect) the module compares the HCA count, port state, physical state, rate and link
    layer and returns every difference in RV(mismatches). It never fails on a difference (an
    C(_info) module reports); judge with C(ansible.builtin.assert) on RV(mismatches), as the
    C(gpucloud.fleet.nccl_fabric) role does.
  - Read-only; the commands run in check mode too.
extends_documentation_fragment:
  - gpucloud.fleet.read_only
attributes:
  platform:
    support: full
    platforms: posix
    description: Linux hosts with rdma-core (C(infiniband-diags) or C(ibverbs-utils)).
requirements:
  - C(ibstat) from the C(infiniband-diags) package for O(source=ibstat).
  - C(ibv_devinfo) from C(ibverbs-utils) (Debian, Ubuntu) or C(libibverbs-utils) (RHEL family)
    for O(source=ibv_devinfo).
options:
  source:
    description:
      - The command whose output to parse.
      - V(ibstat) reports state, physical state and rate (Gb/s) per port.
      - V(ibv_devinfo) runs C(ibv_devinfo -v); rate is width times lane speed and the physical
        state is mapped to C(ibstat)'s words (V(LinkUp)), so O(expect) works the same.
    type: str
    choices: [ibstat, ibv_devinfo]
    default: ibstat
  text:
    description:
      - Output of O(source) captured earlier; parsed instead of running the command.
      - Empty or blank text fails the module.
    type: str
  src:
    description:
      - Path of a file on the host holding output of O(source); parsed instead of running the
        command.
      - An empty or blank file fails the module.
    type: path
  fail_on_missing:
    description:
      - When the command is not installed, fail with a message naming the package.
      - When V(false), report no HCAs (RV(hca_count=0)) instead; O(expect) is still compared.
    type: bool
    default: true
  expect:
    description:
      - What the fabric should look like. When given, the module returns every difference in
        RV(mismatches); it does not fail on them.
      - Port checks apply to every port of every considered CA unless O(expect.ports) narrows
        them. String comparisons ignore case.
      - When no CA is considered (no RDMA device, or O(expect.ca_pattern) or O(expect.ca_names)
        selects none), that is a mismatch unless O(expect.hca_count) is given (V(0) when no HCA
        is expected).
    type: dict
    suboptions:
      hca_count:
        description: Exact number of HCAs considered (after O(expect.ca_names) or O(expect.ca_pattern)).
        type: int
      state:
        description:
          - Logical port state every considered port must have, as C(ibstat) words it.
          - V(Active) when not given.
        type: str
      physical_state:
        description:
          - Physical port state every considered port must have, as C(ibstat) words it.
          - V(LinkUp) when not given. Captured C(ibv_devinfo) output without C(-v) has no
            physical state; then this is only checked when set explicitly.
        type: str
      rate:
        description: Port rate in Gb/s as C(ibstat) prints it, for example V(400) for NDR 4x, V(200) for HDR.
        type: float
      link_layer:
        description: Link layer every considered port must have.
        type: str
        choices: [InfiniBand, Ethernet]
      ca_names:
        description:
          - Only consider these CAs; a listed CA that is missing is a mismatch.
        type: list
        elements: str
      ca_pattern:
        description:
          - Only consider CAs whose whole name matches this regular expression, for example
            V(mlx5_[0-7]) to leave out the Ethernet NICs of a node.
        type: str
      ports:
        description: Port numbers to check on each considered CA; default every port.
        type: list
        elements: int
notes:
  - The commands run with C(LC_ALL=C). When C(ibstat) exits non-zero after printing some CAs
    (for example C(ibpanic) on a device that vanished) the printed CAs are returned with a
    warning, and O(expect.hca_count) reports the missing one.
  - A host whose RDMA stack is not loaded makes C(ibstat) fail with C(can't list IB device
    names); that is reported as no HCAs with a warning.
  - Checking real ports needs real HCAs; in tests use O(text) or O(src) with captured output.
seealso:
  - name: ibstat(8)
    description: The infiniband-diags tool this module parses.
    link: https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/man/ibstat.8.in.rst
"""

EXAMPLES = r"""
- name: Gather the HCAs of the host
  gpucloud.fleet.ib_info:
  register: ib

- name: Compare the HCAs with eight NDR InfiniBand HCAs, all ports up, ignoring the Ethernet NICs
  gpucloud.fleet.ib_info:
    expect:
      hca_count: 8
      ca_pattern: "mlx5_([0-9]|1[0-1])"
      rate: 400
      link_layer: InfiniBand
  register: fabric

- name: Assert the fabric is what the profile says
  ansible.builtin.assert:
    that: fabric.mismatches | length == 0
    fail_msg: "InfiniBand fabric check failed: {{ fabric.mismatches | join('; ') }}"

- name: Parse ibv_devinfo -v output captured earlier
  gpucloud.fleet.ib_info:
    source: ibv_devinfo
    text: "{{ devinfo_capture.stdout }}"

- name: Tolerate hosts without infiniband-diags
  gpucloud.fleet.ib_info:
    fail_on_missing: false
  register: ib
"""

RETURN = r"""
source:
  description: The command the data came from.
  type: str
  returned: always
  sample: ibstat
hca_count:
  description: Number of HCAs found (before any O(expect.ca_names) or O(expect.ca_pattern) selection).
  type: int
  returned: always
  sample: 8
hcas:
  description:
    - HCAs keyed by name, as parsed from O(source). Port numbers are string keys.
    - For V(ibstat) a CA has C(ca_type), C(firmware), C(number_of_ports), C(hardware_version),
      C(node_guid), C(system_image_guid), C(node_type) and C(ports); a port has C(state),
      C(physical_state), C(rate), C(link_layer), C(base_lid), C(sm_lid), C(lmc),
      C(capability_mask), C(port_guid).
    - For V(ibv_devinfo) a device has C(transport), C(fw_ver), C(node_guid), C(sys_image_guid),
      C(vendor_id), C(vendor_part_id), C(hw_ver), C(board_id), C(phys_port_cnt) and C(ports); a
      port has C(state) (V(PORT_ACTIVE)), C(state_code), C(max_mtu), C(active_mtu), C(sm_lid),
      C(port_lid), C(port_lmc), C(link_layer), C(active_width), C(active_speed), C(phys_state),
      C(gids) and the other C(-v) fields.
  type: dict
  returned: always
  sample:
    mlx5_0:
      ca_type: MT4129
      firmware: 28.39.1002
      number_of_ports: 1
      ports:
        "1":
          state: Active
          physical_state: LinkUp
          rate: 400
          link_layer: InfiniBand
          base_lid: 12
          sm_lid: 1
          port_guid: "0xa088c20300e3142a"
mismatches:
  description: Every difference from O(expect); empty when O(expect) is not given or all matched.
  type: list
  elements: str
  returned: always
  sample:
    - "mlx5_3 port 1: state is Down, expected Active"
    - "expected 8 HCA(s), found 7 (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6)"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpucloud.fleet.plugins.module_utils.ibstat import check_fabric, parse_ibstat
from ansible_collections.gpucloud.fleet.plugins.module_utils.ibv_devinfo import parse_ibv_devinfo, to_ibstat_view

_COMMANDS = {
    "ibstat": (["ibstat"], "infiniband-diags"),
    "ibv_devinfo": (["ibv_devinfo", "-v"], "ibverbs-utils (Debian/Ubuntu) or libibverbs-utils (RHEL family)"),
}
# What the tools print when the host has no RDMA device at all.
_NO_DEVICE_MARKERS = ("can't list IB device names", "No IB devices found")


def _parse(source, text):
    """Return (hcas, ibstat-shaped view) for the text of a source."""
    if not text.strip():
        return {}, {}
    if source == "ibstat":
        hcas = parse_ibstat(text)
        return hcas, hcas
    hcas = parse_ibv_devinfo(text)
    return hcas, to_ibstat_view(hcas)


def _read_output(module):
    """Return the text to parse, or None when the command is missing and that is allowed."""
    params = module.params
    if params["text"] is not None:
        if not params["text"].strip():
            module.fail_json(msg="text is empty: a capture of %s output was expected" % params["source"])
        return params["text"]
    if params["src"] is not None:
        try:
            with open(params["src"], "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except (IOError, OSError) as exc:
            module.fail_json(msg="could not read %s: %s" % (params["src"], to_native(exc)))
        if not text.strip():
            module.fail_json(msg="src %s is empty: a capture of %s output was expected" % (params["src"], params["source"]))
        return text

    argv, package = _COMMANDS[params["source"]]
    binary = module.get_bin_path(argv[0])
    if binary is None:
        if params["fail_on_missing"]:
            module.fail_json(msg="%s not found on the host; install the %s package, or set fail_on_missing: false"
                             % (argv[0], package))
        return None
    rc, out, err = module.run_command([binary] + argv[1:], environ_update={"LC_ALL": "C", "LANG": "C"})
    if rc != 0:
        if any(marker in err + out for marker in _NO_DEVICE_MARKERS):
            module.warn("%s found no RDMA devices: %s" % (argv[0], err.strip() or out.strip()))
            return ""
        try:
            if not out.strip():
                raise ValueError("no output")
            _parse(params["source"], out)
        except ValueError:
            module.fail_json(msg="%s failed with rc %d: %s" % (argv[0], rc, err.strip() or out.strip()),
                             rc=rc, stdout=out, stderr=err)
        module.warn("%s exited with rc %d after printing its report: %s" % (argv[0], rc, err.strip()))
    elif err.strip():
        module.warn("%s: %s" % (argv[0], err.strip()))
    return out


def run_module(module):
    source = module.params["source"]
    text = _read_output(module)
    try:
        hcas, view = _parse(source, text or "")
    except ValueError as exc:
        module.fail_json(msg="could not parse %s output: %s" % (source, to_native(exc)))

    result = dict(changed=False, source=source, hcas=hcas, hca_count=len(hcas), mismatches=[])
    if module.params["expect"] is not None:
        expect = dict((key, value) for key, value in module.params["expect"].items() if value is not None)
        try:
            result["mismatches"] = check_fabric(view, expect)
        except ValueError as exc:
            module.fail_json(msg="invalid expect: %s" % to_native(exc), **result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="ibstat", choices=sorted(_COMMANDS)),
            text=dict(type="str"),
            src=dict(type="path"),
            fail_on_missing=dict(type="bool", default=True),
            expect=dict(
                type="dict",
                options=dict(
                    hca_count=dict(type="int"),
                    state=dict(type="str"),
                    physical_state=dict(type="str"),
                    rate=dict(type="float"),
                    link_layer=dict(type="str", choices=["InfiniBand", "Ethernet"]),
                    ca_names=dict(type="list", elements="str"),
                    ca_pattern=dict(type="str"),
                    ports=dict(type="list", elements="int"),
                ),
                mutually_exclusive=[["ca_names", "ca_pattern"]],
            ),
        ),
        mutually_exclusive=[["text", "src"]],
        supports_check_mode=True,
    )
    run_module(module)


if __name__ == "__main__":
    main()
