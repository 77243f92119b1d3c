# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Redact secrets in text and in every file of a log bundle (collect_logs.yml).

redact_text() is pure: text in, (text, number of replacements) out. redact_tree() applies
it to each regular file under a folder. Files are read as bytes and decoded with
surrogateescape, so a file with NUL bytes (kern.log after an unclean shutdown) or invalid
UTF-8 is redacted like any other and written back byte for byte where nothing matched.
"""


import os
import re

REDACTED = "<redacted>"

# Keys whose value is a secret. password/passwd/passphrase values may hold spaces
# ("passphrase: correct horse battery staple"), so an unquoted one runs to the end of the line.
_LONG_KEYS = r"(?:password|passwd|passphrase)"
_SHORT_KEYS = r"(?:secret|token|api[_-]?key|access[_-]?key)"
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"

# (regexp, replacement), applied in order. Each replacement leaves no text that a later
# pattern matches again, so a secret is counted once.
DEFAULT_PATTERNS = [
    # JSON and Redfish payloads: "Password": "...", "token": "..."
    (r'(?i)("[\w.-]*(?:%s|%s)[\w.-]*"\s*:\s*")(?:[^"\\\n]|\\.)*(")' % (_LONG_KEYS, _SHORT_KEYS), r"\1%s\2" % REDACTED),
    # Credentials in a URL: scheme://user:pass@host
    (r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+(@)", r"\1%s\2" % REDACTED),
    # curl -u user:pass, --user user:pass, --user=user:pass
    (r"(?<![\w-])((?:-u\s*|--user[\s=]\s*)['\"]?[^\s:'\"]*:)(?:[^\s'\"]+)", r"\1%s" % REDACTED),
    # ipmitool ... -P pass (the BMC password on the command line)
    (r"(\bipmitool\b[^\n]*?\s-P\s*)(?:%s|\S+)" % _QUOTED, r"\1%s" % REDACTED),
    # Authorization: Bearer|Basic ..., and a bare "Bearer <token>"
    (r"(?i)(Authorization:\s*(?:Bearer|Basic)\s+)[^\s<]\S*", r"\1%s" % REDACTED),
    (r"(?i)(\bBearer\s+)[A-Za-z0-9._~+/=-]+", r"\1%s" % REDACTED),
    # key=value and key: value; quoted values whole, unquoted password values to the end of the line
    (r"(?i)(%s\s*[=:]\s*)(?:%s|[^\s<][^\r\n]*)" % (_LONG_KEYS, _QUOTED), r"\1%s" % REDACTED),
    (r"(?i)(%s\s*[=:]\s*)(?:%s|[^\s<]\S*)" % (_SHORT_KEYS, _QUOTED), r"\1%s" % REDACTED),
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "<redacted-aws-key-id>"),
    (r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b", "<redacted-kubeadm-token>"),
    (r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "<redacted-jwt>"),
    (r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", "<redacted-private-key>"),
]


def compile_patterns(patterns):
    """[{'regexp': ..., 'replace': ...}] or [(regexp, replace)] -> [(compiled, replace)]; ValueError names a bad one."""
    compiled = []
    for index, pattern in enumerate(patterns):
        if isinstance(pattern, dict):
            regexp, replace = pattern.get("regexp"), pattern.get("replace", REDACTED)
        elif isinstance(pattern, (list, tuple)) and len(pattern) == 2:
            regexp, replace = pattern
        else:
            raise ValueError("pattern %d: expected {regexp: ..., replace: ...}, got %r" % (index, pattern))
        if not isinstance(regexp, str) or not regexp or not isinstance(replace, str):
            raise ValueError("pattern %d: regexp and replace must be strings, got %r" % (index, pattern))
        try:
            compiled.append((re.compile(regexp), replace))
        except re.error as exc:
            raise ValueError("pattern %d: %r is not a valid regular expression: %s" % (index, regexp, exc)) from exc
    return compiled


_DEFAULT = compile_patterns(DEFAULT_PATTERNS)


def redact_text(text, patterns=None):
    """Return (text with every match replaced, number of replacements).

    patterns: None for DEFAULT_PATTERNS, else what compile_patterns() takes or returns.
    """
    if patterns is None:
        patterns = _DEFAULT
    elif not all(isinstance(p, tuple) and hasattr(p[0], "subn") for p in patterns):
        patterns = compile_patterns(patterns)
    total = 0
    for regexp, replace in patterns:
        text, count = regexp.subn(replace, text)
        total += count
    return text, total


def redact_file(path, patterns=None, write=True):
    """Redact one file in place; return the number of replacements. OSError propagates."""
    with open(path, "rb") as handle:
        data = handle.read()
    text, count = redact_text(data.decode("utf-8", errors="surrogateescape"), patterns)
    if count and write:
        with open(path, "wb") as handle:
            handle.write(text.encode("utf-8", errors="surrogateescape"))
    return count


def redact_tree(root, extra_patterns=None, write=True):
    """Redact every regular file under root with the default patterns, then extra_patterns.

    Returns {'files': redacted file count, 'redactions': {relative path: count},
    'unprocessed': {relative path: reason}}. A file that cannot be read or written is
    removed from the bundle where possible (it might hold a secret) and listed with why.
    """
    patterns = _DEFAULT + compile_patterns(extra_patterns or [])
    counts, unprocessed, files = {}, {}, 0
    for folder, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            if os.path.islink(path) or not os.path.isfile(path):
                unprocessed[relative] = "not a regular file; left as it is"
                continue
            try:
                count = redact_file(path, patterns, write)
            except (OSError, MemoryError) as exc:
                unprocessed[relative] = "could not be redacted (%s); %s" % (exc, _remove(path, write))
                continue
            files += 1
            if count:
                counts[relative] = count
    return {"files": files, "redactions": counts, "unprocessed": unprocessed}


def _remove(path, write):
    if not write:
        return "would be removed from the bundle"
    try:
        os.remove(path)
    except OSError as exc:
        return "NOT removed from the bundle (%s)" % exc
    return "removed from the bundle"
