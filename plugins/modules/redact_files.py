#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: redact_files
short_description: Redact secrets in every file under a folder, in place
version_added: 0.1.0
description:
  - Replaces known secret patterns in each regular file under O(path), recursively, before a
    troubleshooting bundle leaves the host (the collection's C(playbooks/collect_logs.yml) uses it).
  - "Built in: C(password)/C(passwd)/C(passphrase) values (quoted, or unquoted to the end of the
    line), C(secret)/C(token)/C(api_key)/C(access_key) values, JSON keys holding those words
    (the Redfish C(\"Password\": \"...\") shape), credentials in URLs (C(https://user:pass@host)),
    C(curl -u user:pass), C(ipmitool ... -P pass), C(Authorization:) headers and bare
    C(Bearer <token>), AWS access key ids, kubeadm bootstrap tokens, JWTs and PEM private keys."
  - Files are read as bytes, so files with NUL bytes or invalid UTF-8 (a kern.log after an
    unclean shutdown) are redacted too; bytes outside a match are written back unchanged.
  - A file that cannot be read or written is removed from the folder where possible (it might
    hold a secret) and listed in RV(unprocessed) with the reason; symbolic links and other
    non-regular files are listed there and left alone.
  - Redaction is pattern matching; look at a bundle before sending it outside.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: Counts what would be redacted and changes no file.
  diff_mode:
    support: none
    description: No diff; the secrets themselves must not be shown.
options:
  path:
    description: Folder whose files are redacted.
    type: path
    required: true
  patterns:
    description:
      - More patterns, applied after the built-in ones, in order. Python regular expressions.
    type: list
    elements: dict
    default: []
    suboptions:
      regexp:
        description: Python regular expression.
        type: str
        required: true
      replace:
        description: Replacement; C(\\1) refers to a group.
        type: str
        default: <redacted>
"""

EXAMPLES = r"""
- name: Redact the bundle before packing it
  gpucloud.fleet.redact_files:
    path: /var/tmp/gpucloud-logs.x/gpu-h200-003-20261201T101500Z
    patterns:
      - regexp: '(?i)(x-auth-token:\s*)\S+'
        replace: '\1<redacted>'
  register: redacted
"""

RETURN = r"""
files:
  description: Number of files read and redacted (with or without a match).
  returned: success
  type: int
  sample: 9
redactions:
  description: Replacements per file (path relative to O(path)), for files with at least one.
  returned: success
  type: dict
  sample: {"kern.log": 2, "nvidia-bug-report.log": 5}
unprocessed:
  description: Files that could not be redacted, with the reason and what became of them.
  returned: success
  type: dict
  sample: {"core.bin": "could not be redacted ([Errno 13] Permission denied); removed from the bundle"}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.redact import redact_tree


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            patterns=dict(type="list", elements="dict", default=[], options=dict(
                regexp=dict(type="str", required=True),
                replace=dict(type="str", default="<redacted>"),
            )),
        ),
        supports_check_mode=True,
    )
    if not os.path.isdir(module.params["path"]):
        module.fail_json(msg="path: %s is not a folder" % module.params["path"])
    try:
        result = redact_tree(module.params["path"], module.params["patterns"], write=not module.check_mode)
    except ValueError as exc:
        module.fail_json(msg="patterns: %s" % exc)
    removed = any(reason.endswith("removed from the bundle") for reason in result["unprocessed"].values())
    module.exit_json(changed=bool(result["redactions"]) or removed, **result)


if __name__ == "__main__":
    main()
