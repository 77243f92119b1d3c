# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Redact secrets in text and in every file of a log bundle (collect_logs.yml).

redact_text() is pure: text in, (text, number of replacements) out. redact_tree() applies
it to each regular file under a folder. Files are read as bytes and decoded with
surrogateescape, so a file with NUL bytes (kern.log after an unclean shutdown) or invalid
UTF-8 is redacted like any other and written back byte for byte where nothing matched.

Linear by construction, because a bundle holds whatever a host logged, hostile text included:
- text is processed line by line, and a line is never searched again from its start;
- every rule is a search pattern whose repeats are all bounded (tests/unit checks it), so a
  search does at most a fixed amount of work per starting position, and the starting positions
  are kept at word boundaries by look-behinds;
- the value after a match (a quoted string, a word, the rest of the line) is read once by an
  anchored match and the next search starts after it;
- multi-line secrets (key blocks, Kubernetes Secret data) are a state carried from line to
  line, not a pattern spanning lines.

Files are rewritten by writing a new file beside the old one and renaming it over it: a hard
link to a file outside the bundle keeps its content, symbolic links are never followed, and
data appended while the file is read is read too.
"""


import errno
import gzip
import os
import re
import shutil
import stat
import tempfile
import zlib

try:
    import bz2
except ImportError:  # a Python built without it: bzip2 files are removed, not shipped unread
    bz2 = None
try:
    import lzma
except ImportError:  # likewise for xz
    lzma = None

REDACTED = "<redacted>"
KEY_MARK = "<redacted-private-key>"

# Whole-line key words: password-like values may hold spaces ("passphrase: correct horse
# battery staple"), so an unquoted one runs to the end of the line. pass and pwd count only as a
# word of their own (DB_PASS, Pwd=), never inside one (bypass, passed); PWD/OLDPWD, the shell's
# working directory, are skipped by name.
_LONG = r"(?:password|passwd|passphrase|(?<![a-z])pass|(?<![a-z])pwd)"
# One-word key words: the value ends at white space, a quote, ',', ';' or '&'.
_SHORT = (r"(?:secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?key(?:[_-]?data)?"
          r"|routing[_-]?key|service[_-]?key|integration[_-]?key|user[_-]?key|(?<![a-z])auth|credentials?)")
_NOT_SECRET_NAMES = frozenset(["PWD", "OLDPWD"])
# A name that holds a secret (env name/value pairs): any of the words inside it.
_SECRET_NAME = re.compile(r"(?i)password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|"
                          r"private[_-]?key|credential|(?<![a-z])(?:pass|pwd|auth)(?![a-z])")
# JSON and Python-dict keys: the words anywhere in the key, or auth/pass/pwd/cookie/session as
# the key's last word ("auth" of Docker's config.json, "Cookie" of a header dump).
_JSON_KEY = (r"(?:[\w.-]{0,64}?(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|"
             r"private[_-]?key|client[_-]?key|routing[_-]?key|service[_-]?key|integration[_-]?key|"
             r"user[_-]?key|credential)[\w.-]{0,64}"
             r"|(?:[\w.-]{0,64}[_.-])?(?:auth|pass|pwd|authorization|proxy-authorization|cookie|set-cookie|"
             r"session|sessionid))")
# HTTP headers that carry credentials; a leading scheme word (Bearer, Basic, ...) is kept.
_HEADERS = (r"(?:authorization|proxy-authorization|cookie|set-cookie|x-auth-token|x-api-key|"
            r"x-vault-token|private-token|job-token|x-amz-security-token|x-goog-api-key|api-key|"
            r"x-registry-auth|x-csrf-token|x-xsrf-token|x-access-token)")
_SCHEME = re.compile(r"(?i)(?:bearer|basic|digest|token|negotiate|ntlm|aws4-hmac-sha256|apikey|key|ssws|oauth)"
                     r"[ \t]{1,8}")

# Values read after a match: once, anchored, then the search goes on after them.
_VALUE_DQ = re.compile(r'"(?:[^"\\]|\\.)*"?')
_VALUE_SQ = re.compile(r"'[^']*'?")
_VALUE_WORD = re.compile(r"[^\s\"',;&]*")
_VALUE_ARG = re.compile(r"[^\s\"']*")
_VALUE_URL = re.compile(r"[^\s\"'<>]*")
_VALUE_URL_PART = re.compile(r"[^\s\"'<>?#&]*")
_VALUE_AUTHORITY = re.compile(r"[^\s/?#\"'<>]*")

# Key blocks: PEM (RSA, EC, DSA, PKCS#8, encrypted), OpenSSH, PGP private keys and messages,
# SSH2 (RFC 4716) and OpenVPN static keys. Certificates and public keys are kept.
_BEGIN = re.compile(r"(?i)-{4,5} ?BEGIN ([A-Z0-9][A-Z0-9 ._-]{0,60}?) ?-{4,5}")
_END = re.compile(r"(?i)-{4,5} ?END [A-Z0-9][A-Z0-9 ._-]{0,60}? ?-{4,5}")
_SECRET_LABEL = re.compile(r"(?i)PRIVATE|SECRET|PGP MESSAGE|STATIC KEY")
# nvidia-bug-report.log's section separator: a truncated key block ends there at the latest.
_SECTION = re.compile(r"_{20,200}[ \t]{0,8}\Z")
_PUTTY_LINES = re.compile(r"(?i)Private-Lines:[ \t]{0,8}(\d{1,5})[ \t]{0,8}\Z")
# Kubernetes Secret data: a YAML block mapping, or a JSON/flow mapping up to its '}'.
_YAML_DATA = re.compile(r"([ \t]{0,64})(-[ \t]{1,8})?(?:data|stringData):[ \t]{0,64}(?:#[^\n]{0,512})?\Z")
_BRACE_DATA = re.compile(r"(?:(\\?[\"'])(?:data|stringData)\1|(?<![\w\"'\\-])(?:data|stringData))"
                         r"[ \t]{0,8}:[ \t]{0,8}\{")
_ENV_NAME = re.compile(r"[ \t]{0,64}(?:-[ \t]{1,8})?name:[ \t]{0,8}([\"']?)([\w.-]{1,128})\1[ \t]{0,8}\Z")
_ENV_VALUE = re.compile(r"([ \t]{0,64}value:[ \t]{0,8})")
_COMMAND_END = re.compile(r"[;|&]")
# dpkg's package:architecture (passwd:amd64 in dpkg.log and apt's history) is no key: value.
_DPKG_ARCH = re.compile(r"(?:amd64|arm64|i386|armhf|armel|all|ppc64el|s390x|riscv64|mips64el)(?![\w.-])")


class _Rule(object):
    """A search pattern and what to do with the value after it (or with the whole match)."""

    def __init__(self, name, regexp, value, keys, replace=REDACTED, after=None, scoped=False):
        self.name = name
        self.regexp = re.compile(regexp)
        self.value = value      # 'line', 'word', 'arg', 'quoted', 'header', 'url', 'authority' or None
        self.keys = keys        # lower-case strings; the rule runs on lines holding one of them
        self.replace = replace  # for value None: the whole match becomes this
        self.after = after      # run only on the text after an occurrence of this word
        self.scoped = scoped    # ... and before the end of its command (';', '|' or '&')


_URL_START = r"(?i)(?<![a-z0-9+.-])"
_TOKEN_START = r"(?<![A-Za-z0-9_-])"

RULES = [
    # Webhook and chat URLs whose path is the secret.
    _Rule("webhook", _URL_START + r"(?:hooks\.slack\.com/(?:services|workflows|triggers|actions)/"
          r"|(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/(?:v\d{1,2}/)?webhooks/"
          r"|[a-z0-9-]{1,63}\.webhook\.office\.com/webhookb?2?/|outlook\.office(?:365)?\.com/webhook/"
          r"|api\.telegram\.org/bot|hooks\.zapier\.com/hooks/)",
          "url", ("hooks.", "discord", "webhook", "telegram")),
    _Rule("hooks_path", _URL_START + r"https?://[^\s/\"'<>]{1,253}/(?:[^\s\"'<>?#]{0,256}?/)?hooks/",
          "url_part", ("/hooks/",)),
    # URL query parameters that carry a secret (Teams workflows' sig=, Google Chat's key= and token=).
    _Rule("query", r"(?i)[?&](?:key|token|sig|signature|access_token|api_key|apikey|auth|code|secret|password|"
          r"client_secret|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
          r"x-goog-credential)=", "url_part", ("=",)),
    # scheme://user:password@host for any scheme, an empty user too (redis://:pw@host).
    _Rule("userinfo", _URL_START + r"[a-z][a-z0-9+.-]{0,31}://[^\s/:@\"'<>]{0,256}:", "authority", ("://",)),
    _Rule("header", r"(?i)(?<![\w-])" + _HEADERS + r"[ \t]{0,8}:[ \t]{0,8}", "header",
          ("authorization", "cookie", "token", "api-key", "x-registry-auth")),
    # JSON and Python dict keys: "Password": "...", 'auth': '...'.
    _Rule("json_key", r"(?i)([\"'])" + _JSON_KEY + r"\1[ \t]{0,8}:[ \t]{0,8}(?=[\"'])", "quoted",
          ("pass", "pwd", "secret", "token", "key", "auth", "cookie", "session", "credential")),
    # {"name": "DB_PASSWORD", "value": "..."} (container env in JSON).
    _Rule("json_env", r"(?i)([\"'])name\1[ \t]{0,8}:[ \t]{0,8}([\"'])[\w.-]{0,64}?"
          r"(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|pass|pwd)"
          r"[\w.-]{0,64}\2[ \t]{0,8},[ \t]{0,8}([\"'])value\3[ \t]{0,8}:[ \t]{0,8}(?=[\"'])", "quoted",
          ("value",)),
    # --password=x, --password x, -token x, --client-secret x, --db-pass x (not --bypass, not -p).
    _Rule("flag", r"(?i)(?<![\w-])--?[a-z0-9-]{0,64}?(?:password|passwd|passphrase|secret|token|api-?key|"
          r"access-?key|secret-?key|private-?key|credentials?|(?<=-)pass|(?<=-)pwd)(?:=|[ \t]{1,8})(?!-)",
          "arg", ("-",)),
    # Command lines whose password flag is a short one: only after the tool's name.
    _Rule("ipmitool", r"(?<!\S)-P[ \t]{0,8}", "arg", ("ipmitool",), after="ipmitool"),
    _Rule("sshpass", r"(?<!\S)-p[ \t]{0,8}", "arg", ("sshpass",), after="sshpass", scoped=True),
    _Rule("mysql", r"(?<!\S)-p(?=[^\s-])", "arg", ("mysql",), after="mysql", scoped=True),
    _Rule("redis", r"(?<!\S)-a[ \t]{1,8}", "arg", ("redis-cli",), after="redis-cli", scoped=True),
    # curl -u user:pass, --user user:pass, --proxy-user=user:pass
    _Rule("curl_user", r"(?<![\w-])(?:-u[ \t]{0,8}|--(?:proxy-)?user(?:=|[ \t]{1,8}))[\"']?[^\s:\"']{0,256}:",
          "arg", ("-u", "user")),
    # key=value, key: value, export KEY=value, key = "value" (INI, env, YAML, TOML, logs).
    _Rule("key_line", r"(?i)(?<![\w.-])[\w.-]{0,64}?" + _LONG + r"[ \t]{0,8}[=:][ \t]{0,8}", "line",
          ("pass", "pwd")),
    _Rule("key_word", r"(?i)(?<![\w.-])[\w.-]{0,64}?" + _SHORT + r"[ \t]{0,8}[=:][ \t]{0,8}", "word",
          ("secret", "token", "key", "auth", "credential")),
    _Rule("bearer", r"(?i)\bBearer[ \t]{1,8}(?=[A-Za-z0-9._~+/=-])", "word", ("bearer",)),
    # API tokens recognisable by their published prefixes.
    _Rule("github", _TOKEN_START + r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{30,255})", None,
          ("gh", "github_pat_"), "<redacted-github-token>"),
    _Rule("gitlab", _TOKEN_START + r"(?:gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|oas|agent)-[A-Za-z0-9_-]{20,255}"
          r"|GR1348941[A-Za-z0-9_-]{20,255})", None, ("gl", "gr1348941"), "<redacted-gitlab-token>"),
    _Rule("slack", _TOKEN_START + r"(?:xox[abprse]-[A-Za-z0-9-]{10,255}|xapp-\d-[A-Za-z0-9-]{10,255})", None,
          ("xox", "xapp-"), "<redacted-slack-token>"),
    _Rule("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None, ("akia", "asia"), "<redacted-aws-key-id>"),
    _Rule("google", _TOKEN_START + r"(?:AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,2048}"
          r"|GOCSPX-[0-9A-Za-z_-]{20,64})", None, ("aiza", "ya29.", "gocspx-"), "<redacted-google-key>"),
    # sk-: OpenAI's (sk-proj-, sk-svcacct-, sk-admin-, the old sk- and 48 letters and digits) and
    # Anthropic's (sk-ant-); not OpenSSH's sk-ssh-ed25519@openssh.com algorithm names.
    _Rule("openai", _TOKEN_START + r"sk-(?:(?:proj|svcacct|admin|ant)-[A-Za-z0-9_-]{20,255}|[A-Za-z0-9]{32,255})",
          None, ("sk-",), "<redacted-api-key>"),
    _Rule("huggingface", _TOKEN_START + r"hf_[A-Za-z0-9]{30,255}", None, ("hf_",), "<redacted-hf-token>"),
    _Rule("npm", _TOKEN_START + r"npm_[A-Za-z0-9]{36,255}", None, ("npm_",), "<redacted-npm-token>"),
    _Rule("pypi", _TOKEN_START + r"pypi-[A-Za-z0-9_-]{50,1024}", None, ("pypi-",), "<redacted-pypi-token>"),
    _Rule("stripe", _TOKEN_START + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,255}|whsec_[A-Za-z0-9]{20,255})",
          None, ("_live_", "_test_", "whsec_"), "<redacted-stripe-key>"),
    _Rule("misc_tokens", _TOKEN_START + r"(?:dckr_pat_[A-Za-z0-9_-]{20,255}|hvs\.[A-Za-z0-9_-]{20,255}"
          r"|nvapi-[A-Za-z0-9_-]{20,255})", None, ("dckr_pat_", "hvs.", "nvapi-"), "<redacted-token>"),
    _Rule("kubeadm", r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b", None, (".",), "<redacted-kubeadm-token>"),
    _Rule("jwt", _TOKEN_START + r"eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,8192}", None,
          ("eyj",), "<redacted-jwt>"),
]

# Every search pattern the built-in redaction runs (tests/unit checks that each is bounded).
SEARCH_PATTERNS = [rule.regexp for rule in RULES] + [
    _BEGIN, _END, _SECRET_LABEL, _SECTION, _PUTTY_LINES, _YAML_DATA, _BRACE_DATA, _ENV_NAME, _ENV_VALUE,
    _SCHEME, _SECRET_NAME, _COMMAND_END, _DPKG_ARCH]
# The anchored value readers: one character class (or a fixed-width alternative) repeated.
VALUE_PATTERNS = [_VALUE_DQ, _VALUE_SQ, _VALUE_WORD, _VALUE_ARG, _VALUE_URL, _VALUE_URL_PART, _VALUE_AUTHORITY]

# Compressed files: read by magic number, not by name. Those Python reads are decompressed and
# redacted; the others (and archives, whose members cannot be rewritten) are removed.
_MAGIC = [
    (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"), (b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"), (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\x1f\x9d", "compress"), (b"Rar!\x1a\x07", "rar"),
]
_OPENERS = {"gzip": lambda source: gzip.GzipFile(fileobj=source, mode="rb")}
if bz2 is not None:
    _OPENERS["bzip2"] = lambda source: bz2.BZ2File(source, "rb")
if lzma is not None:
    _OPENERS["xz"] = lambda source: lzma.LZMAFile(source, "rb")
_SUFFIXES = {"gzip": (".gz", ".gzip", ".z"), "bzip2": (".bz2", ".bz"), "xz": (".xz", ".lzma")}
_DECOMPRESS_ERRORS = (EOFError, OSError, zlib.error, ValueError) + ((lzma.LZMAError,) if lzma else ())
# A compressed file may expand without bound (a decompression bomb would fill the node's
# /var/tmp): one that decompresses to more than this is removed and listed, never written out.
MAX_DECOMPRESSED_BYTES = 4 * 1024 ** 3


def compression(head):
    """The compression or archive format of a file that starts with head (bytes), or None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[257:262] == b"ustar":
        return "tar"
    return None


def compile_patterns(patterns):
    """[{'regexp': ..., 'replace': ...}] or [(regexp, replace)] -> [(compiled, replace)]; ValueError names a bad one."""
    compiled = []
    for index, pattern in enumerate(patterns):
        if isinstance(pattern, tuple) and len(pattern) == 2 and hasattr(pattern[0], "subn"):
            compiled.append(pattern)
            continue
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


def _quoted(text, pos):
    """End of the quoted string that starts at pos (an unterminated one runs to the end)."""
    reader = _VALUE_DQ if text[pos] == '"' else _VALUE_SQ
    return reader.match(text, pos).end()


class Redactor(object):
    """Redacts one file's lines in order, carrying multi-line state from one line to the next.

    builtin: apply the built-in rules; extra: compiled (regexp, replace) pairs applied to each line
    after them. count: the replacements so far. ops counts the searches and anchored reads made
    (the tests' linearity check).
    """

    def __init__(self, extra=(), builtin=True):
        self.extra = list(extra)
        self.builtin = builtin
        self.block = None
        self.env_pending = False
        self.ops = 0
        self.count = 0

    def feed(self, line):
        """One line, its line ending included -> (text to write, replacements)."""
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        count = 0
        if self.builtin:
            body, count = self._builtin(body)
            if body is None:
                self.count += count
                return "", count
        for regexp, replace in self.extra:
            self.ops += 1
            body, found = regexp.subn(replace, body)
            count += found
        self.count += count
        return body + ending, count

    def _builtin(self, body):
        count = 0
        if self.block is not None:
            body, count = self._in_block(body)
            if body is None:
                return None, count
        if self.env_pending and body.strip():
            self.env_pending = False
            self.ops += 1
            match = _ENV_VALUE.match(body)
            if match and body[match.end():].strip() and not body[match.end():].startswith(REDACTED[:-1]):
                body, count = match.group(1) + REDACTED, count + 1
        body, found = self._blocks(body)
        count += found
        lower = body.lower()
        for rule in RULES:
            if not any(key in lower for key in rule.keys):
                continue
            body, found = self._apply(rule, body)
            if found:
                count += found
                lower = body.lower()
        return body, count

    def _in_block(self, body):
        """(what a key block or Secret data in progress leaves of a line, or None; replacements)."""
        kind = self.block[0]
        self.ops += 1
        if kind == "key":
            end = _END.search(body)
            if end:
                self.block = None
                rest = body[end.end():]
                return (rest if rest.strip() else None), 0
            if _SECTION.match(body):
                self.block = None
                return body, 0
            return None, 0
        if kind == "lines":
            self.block = ("lines", self.block[1] - 1) if self.block[1] > 1 else None
            return None, 0
        if kind == "brace":
            close = body.find("}")
            if close < 0:
                return None, 0
            self.block = None
            return body[:len(body) - len(body.lstrip(" \t"))] + body[close:], 0
        # kind == "yaml": values of a Secret's data/stringData mapping, by indentation.
        column, scalar = self.block[1], self.block[2]
        if not body.strip():
            return body, 0
        indent = len(body) - len(body.lstrip(" \t"))
        if indent <= column:
            self.block = None
            return body, 0
        if scalar is not None and indent > scalar:
            return None, 0
        self.block = ("yaml", column, None)
        colon = body.find(":")
        value = body[colon + 1:].strip() if colon >= 0 else body.strip()
        if value.startswith(REDACTED[:-1]):
            return body, 0
        if colon < 0:
            return body[:indent] + REDACTED, 1
        if not value or value[0] in "|>":
            self.block = ("yaml", column, indent)
        return body[:colon + 1] + " " + REDACTED, 1

    def _blocks(self, body):
        """Key blocks, Kubernetes Secret data and env name/value pairs that start on this line."""
        count = 0
        if "BEGIN" in body.upper():
            body, count = self._keys(body)
        if self.block is not None:
            return body, count
        self.ops += 4
        putty = _PUTTY_LINES.match(body)
        if putty:
            if int(putty.group(1)):
                self.block = ("lines", int(putty.group(1)))
            return body, count + 1
        if "data" in body.lower():
            yaml = _YAML_DATA.match(body)
            if yaml:
                self.block = ("yaml", len(yaml.group(1)) + len(yaml.group(2) or ""), None)
                return body, count
            body, found = self._brace_data(body)
            count += found
            if self.block is not None:
                return body, count
        name = _ENV_NAME.match(body)
        if name and _SECRET_NAME.search(name.group(2)) and name.group(2) not in _NOT_SECRET_NAMES:
            self.env_pending = True
        return body, count

    def _keys(self, body):
        out, pos, count = [], 0, 0
        while True:
            self.ops += 1
            begin = _BEGIN.search(body, pos)
            if not begin:
                break
            if not _SECRET_LABEL.search(begin.group(1)):
                out.append(body[pos:begin.end()])
                pos = begin.end()
                continue
            out.append(body[pos:begin.start()] + KEY_MARK)
            count += 1
            self.ops += 1
            end = _END.search(body, begin.end())
            if not end:
                # No END on this line: the block runs on (to its END line, the next bug-report
                # section or the end of the file; a truncated key is redacted to there).
                self.block = ("key",)
                return "".join(out), count
            pos = end.end()
        out.append(body[pos:])
        return "".join(out), count

    def _brace_data(self, body):
        out, pos, count = [], 0, 0
        while True:
            self.ops += 1
            start = _BRACE_DATA.search(body, pos)
            if not start:
                break
            close = body.find("}", start.end())
            inner = body[start.end():] if close < 0 else body[start.end():close]
            out.append(body[pos:start.end()])
            if close < 0:
                # The mapping goes on over the next lines, to the first '}'.
                out.append(REDACTED)
                self.block = ("brace",)
                return "".join(out), count + 1
            if inner.strip() and not inner.startswith(REDACTED[:-1]):
                out.append(REDACTED)
                count += 1
            else:
                out.append(inner)
            pos = close
        out.append(body[pos:])
        return "".join(out), count

    def _apply(self, rule, body):
        if not rule.after:
            return self._apply_range(rule, body)
        # A short flag counts only after the tool's name (and, when scoped, within its command:
        # mkdir -p, ssh -p and docker -p elsewhere on the line are no password).
        out, pos, count = [], 0, 0
        while True:
            self.ops += 2
            start = body.find(rule.after, pos)
            if start < 0:
                break
            stop = _COMMAND_END.search(body, start) if rule.scoped else None
            stop = stop.start() if stop else len(body)
            text, found = self._apply_range(rule, body[start:stop])
            out.append(body[pos:start] + text)
            count += found
            pos = stop
        out.append(body[pos:])
        return "".join(out), count

    def _apply_range(self, rule, body):
        out, pos, count = [], 0, 0
        while True:
            self.ops += 1
            match = rule.regexp.search(body, pos)
            if not match:
                break
            if rule.value is None:
                out.append(body[pos:match.start()] + rule.replace)
                count += 1
                pos = match.end()
                continue
            begin, end = self._value(rule, body, match)
            if end > begin and not body.startswith(REDACTED[:-1], begin):
                out.append(body[pos:begin] + REDACTED)
                count += 1
                pos = end
            else:
                out.append(body[pos:match.end()])
                pos = match.end()
        out.append(body[pos:])
        return "".join(out), count

    def _value(self, rule, body, match):
        """(start, end) of the secret after match; start == end when there is none."""
        at = match.end()
        kind = rule.value
        self.ops += 1
        if at >= len(body):
            return at, at
        if kind in ("line", "word") and match.group(0).endswith(":") and _DPKG_ARCH.match(body, at):
            return at, at
        if kind == "quoted":
            # JSON and dict values: the quotes stay, what is between them goes.
            end = _quoted(body, at)
            closed = end - at > 1 and body[end - 1] == body[at]
            return at + 1, end - 1 if closed else end
        if kind == "line":
            key = match.group(0).rstrip(" \t=:").lstrip("-")
            if key in _NOT_SECRET_NAMES:
                return at, at
            return at, _quoted(body, at) if body[at] in "\"'" else len(body.rstrip(" \t"))
        if kind in ("word", "arg"):
            if body[at] in "\"'":
                return at, _quoted(body, at)
            reader = _VALUE_WORD if kind == "word" else _VALUE_ARG
            return at, reader.match(body, at).end()
        if kind == "header":
            quote = body[match.start() - 1] if match.start() and body[match.start() - 1] in "\"'" else None
            end = body.find(quote, at) if quote else -1
            end = len(body.rstrip(" \t")) if end < 0 else end
            scheme = _SCHEME.match(body, at, end)
            return (scheme.end() if scheme else at), end
        if kind == "url":
            return at, _VALUE_URL.match(body, at).end()
        if kind == "url_part":
            return at, _VALUE_URL_PART.match(body, at).end()
        # kind == "authority": the password runs to the last '@' before the path.
        authority = _VALUE_AUTHORITY.match(body, at).end()
        last_at = body.rfind("@", at, authority)
        return (at, last_at) if last_at >= 0 else (at, at)


def _lines(text):
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end + 1]
        start = end + 1


def redact_text(text, patterns=None):
    """Return (text with every match replaced, number of replacements).

    patterns: None for the built-in rules, else only these (what compile_patterns() takes or
    returns), applied line by line.
    """
    redactor = Redactor(compile_patterns(patterns or []), builtin=patterns is None)
    return _run(redactor, _lines(text))


def _run(redactor, lines):
    out, total = [], 0
    for line in lines:
        text, count = redactor.feed(line)
        out.append(text)
        total += count
    return "".join(out), total


def _open_regular(path):
    """Open a regular file for reading without following a symbolic link; (handle, stat)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return os.fdopen(fd, "rb"), info


class _Damaged(Exception):
    """A compressed stream could not be read to its end."""


class _TooLarge(ValueError):
    """A compressed stream decompresses to more than its limit."""


def _pump(source, redactor, out, damaged=(), limit=None):
    """Redact source's lines into out (None: count only) until the source ends; the count.

    damaged: exceptions of reading source that end it early (_Damaged is raised instead).
    limit: the most bytes source may yield (_TooLarge past it); a line is never read past it.
    """
    total, read = 0, 0
    while True:
        try:
            raw = source.readline() if limit is None else source.readline(limit - read + 1)
        except damaged as exc:
            raise _Damaged("%s" % exc) from exc
        if not raw:
            return total
        read += len(raw)
        if limit is not None and read > limit:
            raise _TooLarge("decompresses to more than %d bytes (a decompression bomb, or a file too large "
                            "to redact here)" % limit)
        text, count = redactor.feed(raw.decode("utf-8", errors="surrogateescape"))
        total += count
        if out is not None:
            out.write(text.encode("utf-8", errors="surrogateescape"))


def _replace_with(path, target, info, produce):
    """Write produce(handle)'s output to a new file beside path and rename it to target."""
    fd, temporary = tempfile.mkstemp(prefix=".redact.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as out:
            result = produce(out)
            os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
            try:
                os.fchown(out.fileno(), info.st_uid, info.st_gid)
            except OSError:
                pass
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return result


def redact_file(path, extra_patterns=None, write=True):
    """Redact one regular file with the built-in rules and extra_patterns; the replacements.

    The redacted text goes to a new file that is renamed over path (a hard link elsewhere keeps
    the old content); lines appended while it is read are read too. A symbolic link is refused
    (OSError), never followed. OSError propagates.
    """
    redactor = Redactor(compile_patterns(extra_patterns or []))
    source, info = _open_regular(path)
    with source:
        if not write:
            return _pump(source, redactor, None)

        def produce(out):
            total = _pump(source, redactor, out)
            # A writer still appending (a timed-out bug report's children): read on until the
            # size stands still, so nothing appended before the rename is lost.
            while os.fstat(source.fileno()).st_size > source.tell():
                total += _pump(source, redactor, out)
            return total

        return _replace_with(path, path, info, produce)


def _decompressed_name(path, kind):
    folder, name = os.path.split(path)
    for suffix in _SUFFIXES[kind]:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)]
            break
    else:
        name += ".decompressed"
    target = os.path.join(folder, name)
    if os.path.lexists(target):
        target = os.path.join(folder, name + ".decompressed")
    if os.path.lexists(target):
        raise OSError(errno.EEXIST, "%s exists" % os.path.basename(target))
    return target


def redact_compressed(path, kind, extra_patterns=None, write=True, limit=None):
    """Decompress a gzip, bzip2 or xz file, redact it, and replace it by the result.

    Returns (target path, replacements, note). A truncated or corrupt stream is redacted as far
    as it can be read, and the note says so. ValueError when the content is an archive or is
    compressed again, or when it decompresses to more than limit bytes (default
    MAX_DECOMPRESSED_BYTES): the caller removes the file. OSError propagates.
    """
    limit = MAX_DECOMPRESSED_BYTES if limit is None else limit
    redactor = Redactor(compile_patterns(extra_patterns or []))
    target = _decompressed_name(path, kind)
    source, info = _open_regular(path)
    with source:
        try:
            head = _OPENERS[kind](source).read(512)
        except _DECOMPRESS_ERRORS:
            head = b""
        inner = compression(head)
        if inner:
            raise ValueError("%s data inside %s, which cannot be redacted" % (inner, kind))
        source.seek(0)
        stream = _OPENERS[kind](source)

        def produce(out):
            try:
                return _pump(stream, redactor, out, _DECOMPRESS_ERRORS, limit), ""
            except _Damaged as exc:
                return redactor.count, "%s stream damaged or truncated (%s); redacted as far as it could be read" % (
                    kind, exc)

        if not write:
            total, note = produce(None)
            return target, total, note
        total, note = _replace_with(path, target, info, produce)
    os.remove(path)
    return target, total, note


def redact_tree(root, extra_patterns=None, write=True, max_decompressed=None):
    """Redact every regular file under root with the built-in rules, then extra_patterns.

    Returns {'files': redacted file count, 'redactions': {relative path: count},
    'unprocessed': {relative path: reason}, 'decompressed': {relative path: what became of it}}.
    A file that cannot be read or written, an archive, or a compressed file Python cannot read
    is removed from the bundle where possible (it might hold a secret) and listed with why.
    Symbolic links are listed and never followed.
    """
    extra = compile_patterns(extra_patterns or [])
    counts, unprocessed, decompressed, files = {}, {}, {}, 0

    def unreadable(exc):
        # A folder that cannot be listed would be packed unread: remove it instead.
        if exc.filename and os.path.abspath(exc.filename) != os.path.abspath(root):
            unprocessed[os.path.relpath(exc.filename, root)] = "folder could not be read (%s); %s" % (
                exc.strerror, _remove(exc.filename, write))

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        for name in sorted(dirs):
            if os.path.islink(os.path.join(folder, name)):
                unprocessed[os.path.relpath(os.path.join(folder, name), root)] = (
                    "symbolic link to a folder; not followed, left as it is")
        for name in sorted(names):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            if os.path.islink(path) or not os.path.isfile(path):
                unprocessed[relative] = "not a regular file; left as it is"
                continue
            try:
                kind = _kind(path)
                if kind in _OPENERS:
                    target, count, note = redact_compressed(path, kind, extra, write, max_decompressed)
                    relative_target = os.path.relpath(target, root)
                    decompressed[relative] = "%s %s%s" % (
                        "decompressed to" if write else "would be decompressed to", relative_target,
                        "; " + note if note else "")
                    relative = relative_target
                elif kind:
                    unprocessed[relative] = "%s data that cannot be redacted; %s" % (kind, _remove(path, write))
                    continue
                else:
                    count = redact_file(path, extra, write)
            except ValueError as exc:
                unprocessed[relative] = "%s; %s" % (exc, _remove(path, write))
                continue
            except (OSError, MemoryError) as exc:
                unprocessed[relative] = "could not be redacted (%s); %s" % (exc, _remove(path, write))
                continue
            files += 1
            if count:
                counts[relative] = count
    return {"files": files, "redactions": counts, "unprocessed": unprocessed, "decompressed": decompressed}


def _kind(path):
    source, _info = _open_regular(path)
    with source:
        return compression(source.read(512))


def _remove(path, write):
    if not write:
        return "would be removed from the bundle"
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except OSError as exc:
        return "NOT removed from the bundle (%s)" % exc
    return "removed from the bundle"
