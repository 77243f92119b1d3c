#!/usr/bin/python
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: nccl_tests_result
short_description: Judge an nccl-tests log against bandwidth thresholds
version_added: 0.1.0
author:
  - gpucloud.fleet contributors (@gpucloud)
description:
  - Parses the log of one NVIDIA nccl-tests run (C(all_reduce_perf), C(all_gather_perf) and the
    other C(*_perf) binaries) that is on the host, and judges it.
  - The run fails when any element was wrong (C(#wrong) > 0) or out of bounds, and when the
    average or the peak bus bandwidth is below the given minimum.
  - Reads the classic (2.13 - 2.16), 2.17 and 2.18+ output formats, logs with NCCL INFO/WARN and
    MPI lines mixed in, and logs prefixed by C(mpirun --tag-output) or C(srun --label).
  - Optionally writes the parsed result as JSON to O(dest), reporting C(changed) only when the
    file's content or attributes change, with check mode and diff support.
attributes:
  check_mode:
    support: full
    description: In check mode O(dest) is not written; C(changed) says whether it would be.
  diff_mode:
    support: full
    description: Shows the change to O(dest).
  platform:
    support: full
    platforms: posix
    description: Any host holding the log.
extends_documentation_fragment:
  - ansible.builtin.files
options:
  path:
    description: Path of the nccl-tests log (its stdout) on the host.
    type: path
    required: true
  min_avg_busbw:
    description:
      - Minimum average bus bandwidth in GB/s (the C(# Avg bus bandwidth) line).
      - Must be a finite number; V(nan) or V(inf) fails the module (NaN would switch the check off).
        A measured C(inf) or C(nan) fails the check.
    type: float
  min_max_busbw:
    description:
      - Minimum peak bus bandwidth in GB/s, the largest finite busbw of any row, in-place or out-of-place.
      - Must be a finite number, as O(min_avg_busbw).
    type: float
    aliases: [min_peak_busbw]
  dest:
    description:
      - Write the parsed result, the verdict and the thresholds as JSON to this path on the host.
      - A directory fails the module.
      - The content is deterministic, so a re-run over the same log changes nothing.
    type: path
  fail_on_failure:
    description:
      - When V(true), the module fails if the run does not pass.
      - When V(false), it returns RV(passed=false) and RV(failures) and does not fail.
    type: bool
    default: true
notes:
  - Pass the log of one run. A log holding several runs (or the output of a binary built without
    C(MPI=1) started once per rank) is rejected, because averaging across runs would mislead.
  - A run made with C(-c 0) prints C(N/A) for C(#wrong); it passes the data check with a warning,
    because nothing was validated.
  - Running nccl-tests itself needs GPUs and, across nodes, a working fabric; this module only
    reads its log.
"""

EXAMPLES = r"""
- name: Run all_reduce_perf across the group
  ansible.builtin.command:
    cmd: >-
      mpirun -np 16 --hostfile /etc/nccl/hosts
      /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1
  register: nccl_run
  changed_when: false
  run_once: true

- name: Save the log
  ansible.builtin.copy:
    content: "{{ nccl_run.stdout }}"
    dest: /var/log/nccl/all_reduce.log
    mode: "0644"
  run_once: true

- name: Require 300 GB/s peak and 60 GB/s average bus bandwidth, keep the result as JSON
  gpucloud.fleet.nccl_tests_result:
    path: /var/log/nccl/all_reduce.log
    min_avg_busbw: 60
    min_max_busbw: 300
    dest: /var/log/nccl/all_reduce.json
    mode: "0644"
  run_once: true

- name: Only report
  gpucloud.fleet.nccl_tests_result:
    path: /var/log/nccl/all_reduce.log
    fail_on_failure: false
  register: nccl

- name: Show the verdict
  ansible.builtin.debug:
    msg: "{{ nccl.result.avg_busbw }} GB/s average over {{ nccl.result.ranks }} ranks: {{ nccl.failures or 'pass' }}"
"""

RETURN = r"""
result:
  description:
    - The parsed run. Bandwidths are in GB/s, times in microseconds; NaN is returned as null.
    - C(root) is null for collectives without a root (printed as -1); C(oop_wrong)/C(ip_wrong)
      are null when nccl-tests printed N/A.
  type: dict
  returned: success
  contains:
    avg_busbw:
      description: The C(# Avg bus bandwidth) value.
      type: float
      sample: 70.742
    max_busbw:
      description: The largest busbw of any row, in-place or out-of-place.
      type: float
      sample: 338.82
    ranks:
      description: Number of ranks listed under C(# Using devices).
      type: int
      sample: 16
    wrong:
      description: Total of the C(#wrong) cells.
      type: int
      sample: 0
    out_of_bounds:
      description: The C(# Out of bounds values) count.
      type: int
      sample: 0
    collective:
      description: The test name from C(# Collective test starting) (2.17+), else null.
      type: str
      sample: all_reduce_perf
    version:
      description: The nccl-tests version (2.18+), else null.
      type: str
      sample: 2.18.3
    warnings:
      description: Rows the parser had to drop, with their line numbers.
      type: list
      elements: str
      sample: []
    rows:
      description: One entry per message size.
      type: list
      elements: dict
      sample:
        - size: 8589934592
          count: 2147483648
          type: float
          redop: sum
          root: null
          oop_time_us: 47535.0
          oop_algbw: 180.71
          oop_busbw: 338.82
          oop_wrong: 0
          ip_time_us: 47743.0
          ip_algbw: 179.92
          ip_busbw: 337.35
          ip_wrong: 0
passed:
  description: Whether the run passed every check.
  type: bool
  returned: success
  sample: true
failures:
  description: Why the run did not pass; empty when it passed.
  type: list
  elements: str
  returned: success
  sample:
    - "average bus bandwidth 19.7866 GB/s is below the required 60 GB/s"
dest:
  description: Where the JSON result was written.
  type: str
  returned: when O(dest) is given
  sample: /var/log/nccl/all_reduce.json
"""

import json
import math
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.gpucloud.fleet.plugins.module_utils.nccl_tests import (
    evaluate_nccl_result,
    parse_nccl_tests,
)


def _json_safe(value):
    """Replace NaN and infinities, which JSON cannot carry, with None."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return dict((key, _json_safe(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def _validation_skipped(parsed):
    rows = parsed["rows"]
    return all(row["oop_wrong"] is None and row["ip_wrong"] is None and "oop_error" not in row for row in rows)


def _write_dest(module, dest, content, result):
    """Write content to dest if it differs; honour check mode and diff mode."""
    before = None
    if os.path.isdir(dest):
        module.fail_json(msg="dest %s is a directory; give the path of the JSON file to write" % dest, **result)
    if os.path.exists(dest):
        try:
            with open(dest, "rb") as handle:
                before = handle.read().decode("utf-8", "replace")
        except (IOError, OSError) as exc:
            module.fail_json(msg="could not read dest %s: %s" % (dest, to_native(exc)), **result)
    changed = before != content
    if module._diff:
        result["diff"] = dict(before_header=dest, after_header=dest, before=before or "", after=content)
    if changed and not module.check_mode:
        directory = os.path.dirname(os.path.abspath(dest))
        if not os.path.isdir(directory):
            module.fail_json(msg="the directory of dest does not exist: %s" % directory, **result)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nccl_tests_result.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(content))
        module.atomic_move(tmp, dest)
    if os.path.exists(dest):
        file_args = module.load_file_common_arguments(module.params, path=dest)
        changed = module.set_fs_attributes_if_different(file_args, changed)
    return changed


def run_module(module):
    params = module.params
    try:
        with open(params["path"], "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        module.fail_json(msg="could not read %s: %s" % (params["path"], to_native(exc)))
    try:
        parsed = parse_nccl_tests(text)
    except ValueError as exc:
        module.fail_json(msg="%s is not a usable nccl-tests log: %s" % (params["path"], to_native(exc)))

    try:
        failures = evaluate_nccl_result(parsed, params["min_avg_busbw"], params["min_max_busbw"])
    except ValueError as exc:
        module.fail_json(msg=to_native(exc))
    for warning in parsed["warnings"]:
        module.warn("%s: %s" % (params["path"], warning))
    if _validation_skipped(parsed):
        module.warn("%s: #wrong is N/A (run with -c 0): the data was not validated" % params["path"])

    result = dict(changed=False, result=_json_safe(parsed), passed=not failures, failures=failures)
    if params["dest"]:
        document = dict(result=result["result"], passed=result["passed"], failures=failures,
                        thresholds=dict(min_avg_busbw=params["min_avg_busbw"],
                                        min_max_busbw=params["min_max_busbw"]))
        content = json.dumps(document, indent=2, sort_keys=True) + "\n"
        result["dest"] = params["dest"]
        result["changed"] = _write_dest(module, params["dest"], content, result)

    if failures and params["fail_on_failure"]:
        module.fail_json(msg="nccl-tests run did not pass: %s" % "; ".join(failures), **result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            min_avg_busbw=dict(type="float"),
            min_max_busbw=dict(type="float", aliases=["min_peak_busbw"]),
            dest=dict(type="path"),
            fail_on_failure=dict(type="bool", default=True),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    run_module(module)


if __name__ == "__main__":
    main()
