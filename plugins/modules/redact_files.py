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
  - "Built in, by class: key blocks of every PEM, OpenSSH, PGP (private keys and messages),
    SSH2 and OpenVPN static-key kind, a truncated block without END line included (redacted to
    the next nvidia-bug-report section or the end of the file), PuTTY private lines;
    kubeconfig credentials (C(client-key-data), C(token), C(password), auth-provider tokens and
    C(client-secret)); Kubernetes Secret C(data)/C(stringData) values (YAML, JSON, and the
    last-applied annotation) and container env values whose name holds a secret word; Docker
    and containerd registry C(auth)/C(identitytoken); webhook and chat URLs whose path is the
    secret (Slack, Discord, Teams/Office 365, Telegram, Zapier, any C(/hooks/) URL) and secret
    query parameters (C(sig), C(key), C(token), ...); API tokens by published prefix (GitHub,
    GitLab, Slack, AWS access key ids, Google, OpenAI-style C(sk-), Hugging Face, npm, PyPI,
    Stripe, Docker Hub, Vault, NVIDIA C(nvapi-), JWTs, kubeadm tokens); C(password),
    C(passwd), C(passphrase), C(pass), C(pwd) keys (whole line) and C(secret), C(token),
    C(api_key), C(access_key), C(private_key), C(auth), C(credentials), C(routing_key),
    C(service_key), C(integration_key), C(user_key) keys (one word) in INI, env, YAML, TOML
    and JSON; C(Authorization), C(Proxy-Authorization), C(Cookie), C(Set-Cookie),
    C(X-Auth-Token), C(X-API-Key) and similar headers (a leading scheme word such as C(Bearer)
    is kept); C(scheme://user:password@host) for any scheme; C(--password=x), C(--token x)
    and any C(--*-password), C(--*-secret), C(--*-token), C(--*-key) flag; C(curl -u user:pass);
    C(ipmitool -P), C(sshpass -p), C(mysql -pPASS) and C(redis-cli -a) after those tool
    names only."
  - "Not redacted, on purpose: a bare C(-p) elsewhere (C(mkdir -p), C(ssh -p 22)), the shell's
    C(PWD) and C(OLDPWD), certificates and public keys (C(certificate-authority-data),
    C(client-certificate-data)): they are no secret and tell when a certificate expired.
    Kubernetes C(data:) mappings are redacted wherever they appear, ConfigMaps included."
  - Text is redacted line by line with bounded patterns, so the work grows linearly with the
    size of a file, hostile input included.
  - Files are read as bytes, so files with NUL bytes or invalid UTF-8 (a kern.log after an
    unclean shutdown) are redacted too; bytes outside a match are written back unchanged.
  - The redacted text is written to a new file in the same folder, with the old file's mode,
    and renamed over it. A hard link to a file outside O(path) keeps its content, symbolic
    links (to files or folders) are never followed and are listed in RV(unprocessed), and lines
    appended while a file is read are read too.
  - "Compressed files are recognised by their content. gzip, bzip2 and xz files are
    decompressed, redacted and replaced by the result (C(x.log.gz) becomes C(x.log), or
    C(x.log.decompressed) when C(x.log) exists); a truncated stream (the C(.gz) of a timed-out
    C(nvidia-bug-report.sh)) is redacted as far as it can be read. Archives (tar, zip, 7z, rar)
    and other compression (zstd, lz4, compress) are removed and listed in RV(unprocessed):
    no file leaves unread. A compressed file that decompresses to more than 4 GiB (a
    decompression bomb) is removed and listed too, never written out."
  - A file that cannot be read or written is removed from the folder where possible (it might
    hold a secret) and listed in RV(unprocessed) with the reason.
  - Redaction is pattern matching; look at a bundle before sending it outside.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: Counts what would be redacted (compressed files decompressed in memory) and changes no file.
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
      - More patterns, applied after the built-in ones, in order, to each line. Python regular
        expressions.
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
  sample: {"core.bin": "could not be redacted ([Errno 13] Permission denied); removed from the bundle",
           "etc.tar.gz": "tar data inside gzip, which cannot be redacted; removed from the bundle"}
decompressed:
  description: Compressed files replaced by their redacted content, with the new name (relative to O(path)).
  returned: success
  type: dict
  sample: {"nvidia-bug-report.log.gz": "decompressed to nvidia-bug-report.log.decompressed; gzip stream damaged or
           truncated (Compressed file ended before the end-of-stream marker was reached); redacted as far as it could be read"}
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
    module.exit_json(changed=bool(result["redactions"] or result["decompressed"]) or removed, **result)


if __name__ == "__main__":
    main()
