# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import os
import re

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import redact
from ansible_collections.gpucloud.fleet.plugins.module_utils.redact import (
    compile_patterns, redact_file, redact_text, redact_tree)


@pytest.mark.parametrize("text,expected", [
    # Redfish PATCH /redfish/v1/AccountService/Accounts/2 payload
    ('{"UserName": "admin", "Password": "Sup3r S3cret!", "RoleId": "Administrator"}',
     '{"UserName": "admin", "Password": "<redacted>", "RoleId": "Administrator"}'),
    ('{"Password":"a\\"b"}', '{"Password":"<redacted>"}'),
    ('{"access_token": "abc.def"}', '{"access_token": "<redacted>"}'),
    ("fetching https://admin:hunter2@bmc-17.mgmt/redfish/v1", "fetching https://admin:<redacted>@bmc-17.mgmt/redfish/v1"),
    ("curl -sk -u root:calvin https://10.0.0.5/redfish/v1", "curl -sk -u root:<redacted> https://10.0.0.5/redfish/v1"),
    ("curl --user=root:calvin x", "curl --user=root:<redacted> x"),
    ("curl --user 'root:calvin' x", "curl --user 'root:<redacted>' x"),
    ("ipmitool -I lanplus -H 10.0.0.5 -U admin -P calvin chassis status",
     "ipmitool -I lanplus -H 10.0.0.5 -U admin -P <redacted> chassis status"),
    ("ipmitool -I lanplus -U admin -P 'two words' power on", "ipmitool -I lanplus -U admin -P <redacted> power on"),
    ("sent Bearer eyJhbGciOi.x-y_z", "sent Bearer <redacted>"),
    ("Authorization: Bearer abc123", "Authorization: Bearer <redacted>"),
    ('password="correct horse battery"', "password=<redacted>"),
    ("password = 'correct horse battery' # comment", "password = <redacted> # comment"),
    ("passphrase: correct horse battery staple", "passphrase: <redacted>"),
    ("IPMI_PASSWORD=calvin", "IPMI_PASSWORD=<redacted>"),
    ("token=abc def", "token=<redacted> def"),
    ("AKIAABCDEFGHIJKLMNOP", "<redacted-aws-key-id>"),
])
def test_secret_shapes_are_redacted_once(text, expected):
    redacted, count = redact_text(text)
    assert redacted == expected
    assert count == 1


@pytest.mark.parametrize("text", [
    "journalctl -u nvidia-fabricmanager --no-pager",
    "http://mirror.example:8080/debian/ trixie main",
    "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.",
    "passwordless sudo for ansible",
])
def test_ordinary_lines_are_kept(text):
    assert redact_text(text) == (text, 0)


def test_custom_patterns_replace_the_defaults():
    assert redact_text("password=x serial=123", [{"regexp": r"serial=\d+", "replace": "serial=<s>"}]) == (
        "password=x serial=<s>", 1)
    assert redact_text("a", []) == ("a", 0)


@pytest.mark.parametrize("bad", [[{"regexp": "("}], [{"regexp": 5}], ["x"]])
def test_bad_patterns_are_refused_by_position(bad):
    with pytest.raises(ValueError, match="pattern 0"):
        compile_patterns(bad)


def test_file_with_nul_bytes_and_invalid_utf8_is_redacted(tmp_path):
    # kern.log after an unclean shutdown: a run of NUL bytes where the last blocks were lost.
    data = (b"Dec  1 10:00:01 gpu1 kernel: \x00\x00\x00\x00\xff\xfe garbage\n"
            b"Dec  1 10:00:02 gpu1 sudo: ipmitool -U admin -P calvin sel list\n")
    path = tmp_path / "kern.log"
    path.write_bytes(data)
    assert redact_file(str(path)) == 1
    assert path.read_bytes() == data.replace(b"-P calvin", b"-P <redacted>")


def test_tree_reports_counts_and_what_it_could_not_process(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "clean.txt").write_text("nothing here\n")
    (tmp_path / "sub" / "redfish.json").write_text('{"Password": "x"}\n{"Password": "y"}\n')
    (tmp_path / "kern.log").write_bytes(b"\x00\x00token=abc\n")
    (tmp_path / "locked.log").write_text("password=x\n")
    os.symlink("/etc/shadow", str(tmp_path / "shadow"))
    real = redact.redact_file

    def refuse_locked(path, patterns=None, write=True):
        if path.endswith("locked.log"):
            raise PermissionError(13, "Permission denied")
        return real(path, patterns, write)

    monkeypatch.setattr(redact, "redact_file", refuse_locked)
    report = redact_tree(str(tmp_path), [{"regexp": "nothing", "replace": "something"}])
    assert report["redactions"] == {"sub/redfish.json": 2, "kern.log": 1, "clean.txt": 1}
    assert report["files"] == 3
    assert report["unprocessed"] == {
        "shadow": "not a regular file; left as it is",
        "locked.log": "could not be redacted ([Errno 13] Permission denied); removed from the bundle"}
    assert not (tmp_path / "locked.log").exists()
    assert (tmp_path / "kern.log").read_bytes() == b"\x00\x00token=<redacted>\n"


def test_tree_in_check_mode_writes_nothing(tmp_path):
    (tmp_path / "a.log").write_text("password=x\n")
    assert redact_tree(str(tmp_path), write=False)["redactions"] == {"a.log": 1}
    assert (tmp_path / "a.log").read_text() == "password=x\n"


# Issue 28 item 4: every class of secret, not one example. (text, secrets that must be gone)
SECRET_CLASSES = [
    # kubeconfig: client key, token, auth-provider and exec credentials
    ("    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=", ["LS0tLS1CRUdJTiBSU0Eg"]),
    ("    token: 2f1d0c9b8a7e6d5c", ["2f1d0c9b8a7e6d5c"]),
    ("        access-token: opaque-access-value", ["opaque-access-value"]),
    ("        client-secret: s3cr3t-value", ["s3cr3t-value"]),
    ("        refresh-token: 1//0grefresh", ["1//0grefresh"]),
    ("    password: kube-admin-pw", ["kube-admin-pw"]),
    # Docker config.json and containerd registry auth
    ('{"auths":{"nvcr.io":{"auth":"JG9hdXRodG9rZW46bnZhcGk=","identitytoken":"idt0k"}}}', ["JG9hdXRo", "idt0k"]),
    ('  auth = "dXNlcjpwYXNzd29yZA=="', ["dXNlcjpwYXNz"]),
    # webhook and chat URLs whose path is the secret
    ("slack_api_url: https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/abcdefghijklmnopqrstuvwx",
     ["T0A1B2C3D", "abcdefghijklmnopqrstuvwx"]),
    ("POST https://discord.com/api/webhooks/123456789012345678/aBcD-eFgH_iJkL ok", ["aBcD-eFgH_iJkL", "1234567890"]),
    ("https://contoso.webhook.office.com/webhookb2/1111-2222@3333-4444/IncomingWebhook/5555/6666",
     ["1111-2222", "IncomingWebhook/5555"]),
    ("https://prod-12.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?sv=1.0&sig=Zx9SiG",
     ["Zx9SiG"]),
    ("https://mattermost.example.com/hooks/xh7kd9fj3 and https://rocket.example.com/hooks/ID1/TOKEN1",
     ["xh7kd9fj3", "TOKEN1"]),
    ("https://chat.googleapis.com/v1/spaces/AAAA/messages?key=gchatkey1&token=gchattoken2",
     ["gchatkey1", "gchattoken2"]),
    ("https://api.telegram.org/bot123456:ABC-DEF1234ghIkl/sendMessage", ["ABC-DEF1234ghIkl"]),
    # API tokens by their published prefixes
    ("ghp_" + "a" * 36 + " gho_" + "b" * 36 + " ghs_" + "c" * 36 + " github_pat_11AB" + "d" * 40,
     ["a" * 36, "b" * 36, "c" * 36, "d" * 40]),
    ("glpat-" + "e" * 20 + " xoxb-1234567890-" + "f" * 12 + " xoxp-12-34-" + "g" * 12, ["e" * 20, "f" * 12, "g" * 12]),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["wJalrXUtnFEMI"]),
    ("AKIAIOSFODNN7EXAMPLE ASIAIOSFODNN7EXAMPLE", ["IOSFODNN7EXAMPLE"]),
    ("AIza" + "h" * 35 + " sk-proj-" + "i" * 24 + " sk-" + "p" * 48 + " sk-ant-api03-" + "q" * 30 + " hf_" + "j" * 34 + " npm_" + "k" * 36,
     ["h" * 35, "i" * 24, "p" * 48, "q" * 30, "j" * 34, "k" * 36]),
    ("pypi-AgEIcHlwaS5vcmc" + "l" * 60 + " sk_live_" + "m" * 24 + " rk_live_" + "n" * 24, ["l" * 60, "m" * 24, "n" * 24]),
    ("nvapi-" + "o" * 40 + " eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3In0.c2lnbmF0dXJlLXZhbHVl",
     ["o" * 40, "eyJzdWIiOiIxMjM0NTY3In0"]),
    # pass/pwd keys in INI and env files
    ("pass = ini-pass-1", ["ini-pass-1"]),
    ("pwd=ini-pwd-2", ["ini-pwd-2"]),
    ('DB_PASS="env pass 3"', ["env pass 3"]),
    ("export MYSQL_PWD=env-pwd-4", ["env-pwd-4"]),
    ("Driver={x};Uid=sa;Pwd=odbc-pwd-5;", ["odbc-pwd-5"]),
    ("db.password: yaml-pw-6", ["yaml-pw-6"]),
    # cookies and session headers
    ("Cookie: session=abc123; csrftoken=def456", ["abc123", "def456"]),
    ("Set-Cookie: sid=xyz789; Path=/; HttpOnly", ["xyz789"]),
    ("Proxy-Authorization: Basic dXNlcjpwYXNz", ["dXNlcjpwYXNz"]),
    ("X-Auth-Token: xat-1", ["xat-1"]),
    ("X-API-Key: xak-2", ["xak-2"]),
    ("Authorization: token tok-3", ["tok-3"]),
    ("curl -H 'Authorization: Digest username=\"u\", response=\"r3sp\"' https://x/", ["r3sp"]),
    ("{'Authorization': 'Bearer dict-bearer', 'Host': 'h'}", ["dict-bearer"]),
    # URL userinfo for any scheme, an empty user and a password with '@' included
    ("amqp://guest:amqp-pw@rabbit:5672/", ["amqp-pw"]),
    ("redis://:redis-pw@redis:6379/0", ["redis-pw"]),
    ("postgres://u:p@ss-word@db/x", ["p@ss-word", "ss-word"]),
    ("mongodb+srv://u:mongo-pw@c.mongodb.net/", ["mongo-pw"]),
    # command-line flags
    ("mysqladmin --password=flag-pw-1 status", ["flag-pw-1"]),
    ("app --token flag-tok-2 --password 'flag pw 3' --db-pass flag-pw-4 --api-key=flag-key-5",
     ["flag-tok-2", "flag pw 3", "flag-pw-4", "flag-key-5"]),
    ("mysql -u root -pmysql-pw-6 db", ["mysql-pw-6"]),
    ("sshpass -p sshpass-pw-7 ssh host", ["sshpass-pw-7"]),
    ("redis-cli -a redis-pw-8 ping", ["redis-pw-8"]),
    # paging and alerting service keys (Alertmanager receivers)
    ("  - routing_key: R0123456789abcdef0123456789abcdef", ["R0123456789abcdef"]),
    ("    service_key: pd-service-key", ["pd-service-key"]),
    ("    integration_key=pd-integration-key", ["pd-integration-key"]),
    ("  - api_key: opsgenie-key", ["opsgenie-key"]),
    ("    routing_key: victorops-routing", ["victorops-routing"]),
    ("  - user_key: pushover-user", ["pushover-user"]),
    ("    bearer_token: am-bearer", ["am-bearer"]),
    ('{"routing_key": "json-routing", "apiKey": "json-apikey"}', ["json-routing", "json-apikey"]),
]


@pytest.mark.parametrize("text,secrets", SECRET_CLASSES)
def test_each_class_of_secret_is_redacted(text, secrets):
    redacted, count = redact_text(text)
    for secret in secrets:
        assert secret not in redacted
    assert count >= 1
    assert redact_text(redacted) == (redacted, 0)


@pytest.mark.parametrize("text", [
    "mkdir -p /var/tmp/gpucloud-logs; ssh -p 22 gpu1; docker run -p 8080:80 img",
    "max_tokens=512 passed: 5 bypass=true author: x oauth_url=https://login.example/",
    "PWD=/root",
    "OLDPWD=/home/alice",
    "/usr/share/initramfs-tools/hooks/nvidia",
    "https://example.com/api?page=2&sort=asc",
    "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    "    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    "ssh alice@gpu1.example -i ~/.ssh/id_ed25519",
    "mysql -u root -p db; app --password-stdin",
    "-----BEGIN CERTIFICATE-----",
    # dpkg.log and apt's history.log name packages with their architecture
    "2026-12-03 08:37:12 status installed passwd:amd64 1:4.13+dfsg1-1+deb12u2",
    "Upgrade: login:amd64 (1:4.13+dfsg1-1+deb12u1, 1:4.13+dfsg1-1+deb12u2), passwd:arm64 (1:4.13)",
    # sshd -T (tests/fixtures/compliance/sshd-T-debian12-default.txt)
    "pubkeyacceptedalgorithms sk-ssh-ed25519-cert-v01@openssh.com,sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
])
def test_lookalikes_are_kept(text):
    assert redact_text(text) == (text, 0)


KEY_BODY = "MIIEowIBAAKCAQEAsecretkeymaterial0123456789\nQkFTRTY0IGtleSBib2R5IGxpbmUgdHdv\n"


@pytest.mark.parametrize("begin,end", [
    ("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"),
    ("-----BEGIN EC PRIVATE KEY-----", "-----END EC PRIVATE KEY-----"),
    ("-----BEGIN DSA PRIVATE KEY-----", "-----END DSA PRIVATE KEY-----"),
    ("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"),
    ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "-----END ENCRYPTED PRIVATE KEY-----"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "-----END PGP PRIVATE KEY BLOCK-----"),
    ("-----BEGIN PGP MESSAGE-----", "-----END PGP MESSAGE-----"),
    ("---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----", "---- END SSH2 ENCRYPTED PRIVATE KEY ----"),
    ("-----BEGIN OpenVPN Static key V1-----", "-----END OpenVPN Static key V1-----"),
])
def test_key_blocks_of_every_kind_are_redacted(begin, end):
    text = "before\n%s\nProc-Type: 4,ENCRYPTED\n\n%s%s\nafter\n" % (begin, KEY_BODY, end)
    assert redact_text(text) == ("before\n<redacted-private-key>\nafter\n", 1)
    # the same block as one JSON string with \n escapes, and a truncated block (no END line)
    one_line = '{"key": "%s\\n%s\\n%s\\n", "user": "u"}' % (begin, KEY_BODY.replace("\n", "\\n"), end)
    assert redact_text(one_line) == ('{"key": "<redacted-private-key>\\n", "user": "u"}', 1)
    truncated = "before\n%s\n%s" % (begin, KEY_BODY)
    assert redact_text(truncated) == ("before\n<redacted-private-key>\n", 1)


def test_truncated_key_ends_at_the_next_bug_report_section_and_certificates_stay():
    cert = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n"
    separator = "_" * 44 + "\n"
    text = cert + "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n" + separator + "*** /var/log/kern.log\nline\n"
    assert redact_text(text) == (
        cert + "<redacted-private-key>\n" + separator + "*** /var/log/kern.log\nline\n", 1)


def test_putty_private_lines_are_redacted():
    text = ("PuTTY-User-Key-File-3: ssh-ed25519\nPublic-Lines: 1\nAAAApublic\nPrivate-Lines: 2\n"
            "AAAAsecret1\nAAAAsecret2\nPrivate-MAC: 0123\n")
    redacted, count = redact_text(text)
    assert "secret" not in redacted and "AAAApublic" in redacted and "Private-MAC: 0123" in redacted
    assert count == 1


SECRET_YAML = """apiVersion: v1
data:
  password: c2VjcmV0LXBhc3N3b3Jk
  tls.key: |
    LS0tLS1CRUdJTiBLRVkgbGluZTE=
    bGluZTI=
kind: Secret
stringData:
  config.yaml: |
    user: a
    pw: string-data-secret
type: Opaque
"""


def test_kubernetes_secret_data_yaml_and_json():
    redacted, count = redact_text(SECRET_YAML)
    assert redacted == ("apiVersion: v1\ndata:\n  password: <redacted>\n  tls.key: <redacted>\nkind: Secret\n"
                        "stringData:\n  config.yaml: <redacted>\ntype: Opaque\n")
    assert count == 3
    pretty = '{\n    "data": {\n        "password": "c2VjcmV0",\n        "user": "YWRtaW4="\n    },\n    "kind": "Secret"\n}\n'
    assert redact_text(pretty) == ('{\n    "data": {<redacted>\n    },\n    "kind": "Secret"\n}\n', 1)
    applied = ('    kubectl.kubernetes.io/last-applied-configuration: {"apiVersion":"v1",'
               '"data":{"token":"dG9rZW4="},"kind":"Secret"}')
    assert redact_text(applied)[0].endswith('"data":{<redacted>},"kind":"Secret"}')
    escaped = '"{\\"apiVersion\\":\\"v1\\",\\"stringData\\":{\\"k\\":\\"plain-secret\\"}}"'
    assert "plain-secret" not in redact_text(escaped)[0]


def test_container_env_name_value_pairs():
    text = ("        env:\n        - name: AWS_SECRET_ACCESS_KEY\n          value: abc/def\n"
            "        - name: HOME\n          value: /root\n")
    assert redact_text(text) == (text.replace("abc/def", "<redacted>"), 1)
    assert redact_text('{"name": "DB_PASSWORD", "value": "hunter2"}') == (
        '{"name": "DB_PASSWORD", "value": "<redacted>"}', 1)


# Linear by construction (issue 28 item 4): 256 KB of hostile text took 28-56 s. No wall-clock
# here: every search pattern is checked for bounded repeats, and the work a redaction does
# (searches and anchored reads, Redactor.ops) is counted at 64 KB and 256 KB.
try:
    from re import _parser as _sre_parse  # Python >= 3.11
except ImportError:  # pragma: no cover
    import sre_parse as _sre_parse
MAXREPEAT = _sre_parse.MAXREPEAT


def _parse(regexp):
    return _sre_parse.parse(regexp.pattern, regexp.flags)


def _repeats(items, inside=0):
    """Yield (min, max, nested repeat count, body) for every repeat in a parsed pattern."""
    for op, arg in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            yield low, high, inside, body
            yield from _repeats(body, inside + (high > 1))
        elif name == "SUBPATTERN":
            yield from _repeats(arg[-1], inside)
        elif name == "BRANCH":
            for branch in arg[1]:
                yield from _repeats(branch, inside)
        elif name in ("ASSERT", "ASSERT_NOT"):
            yield from _repeats(arg[1], inside)


def test_every_search_pattern_is_bounded_and_unnested():
    for regexp in redact.SEARCH_PATTERNS:
        for low, high, nested, _body in _repeats(_parse(regexp)):
            assert high != MAXREPEAT and high <= 8192, "unbounded repeat in %r" % regexp.pattern
            assert not nested, "repeat inside a repeat in %r" % regexp.pattern


def test_value_readers_are_one_deterministic_run():
    # A value is read once, anchored, by one repeat of single characters (or a two-character
    # escape): no nesting, so reading it costs its length.
    for regexp in redact.VALUE_PATTERNS:
        for low, high, nested, body in _repeats(_parse(regexp)):
            assert not nested
            assert body.getwidth()[1] <= 2, regexp.pattern


def test_the_old_catastrophic_patterns_would_fail_the_check():
    old = [re.compile(r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----"),
           re.compile(r"(\bipmitool\b[^\n]*?\s-P\s*)(\S+)")]
    for regexp in old:
        assert any(high == MAXREPEAT for _low, high, _n, _b in _repeats(_parse(regexp)))


HOSTILE = {
    "begin lines without END": "-----BEGIN RSA PRIVATE KEY-----\n",
    "BEGIN markers on one line": "-----BEGIN PRIVATE KEY----- ",
    "certificate BEGINs on one line": "-----BEGIN CERTIFICATE----- ",
    "ipmitool words on one line": "ipmitool ",
    "ipmitool -P on one line": "ipmitool -P ",
    "unterminated quotes": 'token="a ',
    "JWT prefixes": "eyJ",
    "scheme-like dots": "a.",
    "userinfo without @": "a://b:",
    "JSON key without value": '"password',
    "flags without values": "--password ",
    "bare Bearer": "Bearer ",
    "hooks URLs": "https://h/hooks/",
    "Secret data braces": '"data": {',
    "yaml data keys": "data:\n",
    "names of secrets": "- name: X_TOKEN\n",
    "key words": "password=",
    "mysql flags": "mysql -p",
    "query keys": "?key=",
}


def _ops(unit, size):
    text = (unit * (size // len(unit) + 1))[:size]
    redactor = redact.Redactor()
    for line in redact._lines(text):
        redactor.feed(line)
    return redactor.ops


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_costs_linear_work(name):
    small, large = _ops(HOSTILE[name], 64 * 1024), _ops(HOSTILE[name], 256 * 1024)
    assert large <= 4 * small + 64, (name, small, large)


def test_hostile_key_block_is_redacted_to_the_end():
    text = "-----BEGIN RSA PRIVATE KEY-----\n" * 8192
    assert redact_text(text) == ("<redacted-private-key>\n", 1)
    line = "ipmitool -U admin -P calvin " * 9000
    redacted, count = redact_text(line)
    assert "calvin" not in redacted and count == 9000


# Issue 28 item 5: compressed files are decompressed and redacted, or removed; never shipped unread.
def test_gzip_bz2_and_xz_are_decompressed_and_redacted(tmp_path):
    import bz2
    import gzip
    import lzma
    (tmp_path / "nvidia-bug-report.log.gz").write_bytes(gzip.compress(b"a\npassword=gz-secret\n"))
    (tmp_path / "old.log.bz2").write_bytes(bz2.compress(b"token=bz-secret\n"))
    (tmp_path / "x.xz").write_bytes(lzma.compress(b"Cookie: sid=xz-secret\n"))
    (tmp_path / "rotated").write_bytes(gzip.compress(b"secret: no-suffix\n"))
    os.chmod(str(tmp_path / "x.xz"), 0o640)
    report = redact_tree(str(tmp_path))
    assert sorted(os.listdir(str(tmp_path))) == ["nvidia-bug-report.log", "old.log", "rotated.decompressed", "x"]
    assert (tmp_path / "nvidia-bug-report.log").read_bytes() == b"a\npassword=<redacted>\n"
    assert (tmp_path / "old.log").read_bytes() == b"token=<redacted>\n"
    assert (tmp_path / "x").read_bytes() == b"Cookie: <redacted>\n"
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o640
    assert report["redactions"] == {"nvidia-bug-report.log": 1, "old.log": 1, "rotated.decompressed": 1, "x": 1}
    assert report["decompressed"] == {
        "nvidia-bug-report.log.gz": "decompressed to nvidia-bug-report.log", "old.log.bz2": "decompressed to old.log",
        "rotated": "decompressed to rotated.decompressed", "x.xz": "decompressed to x"}
    assert report["unprocessed"] == {}


def test_truncated_gzip_of_a_timed_out_bug_report_is_redacted_as_far_as_it_reads(tmp_path):
    import gzip
    whole = gzip.compress(b"".join(b"line %d token=t%d\n" % (n, n) for n in range(20000)))
    (tmp_path / "nvidia-bug-report.log.gz").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "nvidia-bug-report.log").write_bytes(b"an earlier, finished report\n")
    report = redact_tree(str(tmp_path))
    assert not (tmp_path / "nvidia-bug-report.log.gz").exists()
    text = (tmp_path / "nvidia-bug-report.log.decompressed").read_bytes()
    assert text.startswith(b"line 0 token=<redacted>\n") and re.search(rb"token=t\d", text) is None
    assert "truncated" in report["decompressed"]["nvidia-bug-report.log.gz"]
    assert report["redactions"]["nvidia-bug-report.log.decompressed"] > 1000


def test_archives_and_unreadable_compression_are_removed_and_listed(tmp_path):
    import gzip
    import io
    import tarfile
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("etc/secret.conf")
        info.size = 11
        tar.addfile(info, io.BytesIO(b"password=x\n"))
    (tmp_path / "etc.tar.gz").write_bytes(buffer.getvalue())
    (tmp_path / "log.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    (tmp_path / "a.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 26)
    (tmp_path / "double.gz").write_bytes(gzip.compress(gzip.compress(b"password=x\n")))
    report = redact_tree(str(tmp_path))
    assert os.listdir(str(tmp_path)) == []
    assert report["unprocessed"] == {
        "a.zip": "zip data that cannot be redacted; removed from the bundle",
        "double.gz": "gzip data inside gzip, which cannot be redacted; removed from the bundle",
        "etc.tar.gz": "tar data inside gzip, which cannot be redacted; removed from the bundle",
        "log.zst": "zstd data that cannot be redacted; removed from the bundle"}


def test_compressed_file_in_check_mode_is_read_and_left(tmp_path):
    import gzip
    data = gzip.compress(b"password=x\n")
    (tmp_path / "r.log.gz").write_bytes(data)
    report = redact_tree(str(tmp_path), write=False)
    assert report["redactions"] == {"r.log": 1}
    assert report["decompressed"] == {"r.log.gz": "would be decompressed to r.log"}
    assert os.listdir(str(tmp_path)) == ["r.log.gz"] and (tmp_path / "r.log.gz").read_bytes() == data


# Issue 28 item 6: a new file renamed over the old one; links are neither written through nor followed.
def test_hard_link_to_a_file_outside_the_bundle_keeps_its_content(tmp_path):
    outside, bundle = tmp_path / "etc", tmp_path / "bundle"
    outside.mkdir()
    bundle.mkdir()
    (outside / "app.conf").write_text("password=kept-outside\n")
    os.chmod(str(outside / "app.conf"), 0o600)
    os.link(str(outside / "app.conf"), str(bundle / "app.conf"))
    report = redact_tree(str(bundle))
    assert report["redactions"] == {"app.conf": 1}
    assert (outside / "app.conf").read_text() == "password=kept-outside\n"
    assert (bundle / "app.conf").read_text() == "password=<redacted>\n"
    assert (bundle / "app.conf").stat().st_mode & 0o777 == 0o600
    assert (bundle / "app.conf").stat().st_ino != (outside / "app.conf").stat().st_ino
    assert sorted(os.listdir(str(bundle))) == ["app.conf"]


def test_symbolic_links_out_of_the_bundle_are_not_followed(tmp_path):
    outside, bundle = tmp_path / "etc", tmp_path / "bundle"
    outside.mkdir()
    bundle.mkdir()
    (outside / "app.conf").write_text("password=kept-outside\n")
    os.symlink(str(outside / "app.conf"), str(bundle / "app.conf"))
    os.symlink(str(outside), str(bundle / "etc"))
    report = redact_tree(str(bundle))
    assert (outside / "app.conf").read_text() == "password=kept-outside\n"
    assert os.path.islink(str(bundle / "app.conf")) and os.path.islink(str(bundle / "etc"))
    assert report == {"files": 0, "redactions": {}, "decompressed": {}, "unprocessed": {
        "app.conf": "not a regular file; left as it is",
        "etc": "symbolic link to a folder; not followed, left as it is"}}
    with pytest.raises(OSError):
        redact_file(str(bundle / "app.conf"))
    assert (outside / "app.conf").read_text() == "password=kept-outside\n"


def test_lines_appended_while_a_file_is_redacted_are_redacted_too(tmp_path, monkeypatch):
    path = tmp_path / "journal.txt"
    path.write_text("one\ntwo token=a\n")
    real = redact.Redactor.feed
    appended = []

    def feed_and_append(self, line):
        if line.startswith("two") and not appended:
            with open(str(path), "a") as late:
                late.write("three token=late\n")
            appended.append(True)
        return real(self, line)

    monkeypatch.setattr(redact.Redactor, "feed", feed_and_append)
    assert redact_file(str(path)) == 2
    assert path.read_text() == "one\ntwo token=<redacted>\nthree token=<redacted>\n"


def test_a_folder_that_cannot_be_listed_is_removed_not_packed_unread(tmp_path, monkeypatch):
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "app.conf").write_text("password=x\n")
    real = os.scandir

    def refuse_locked(path="."):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", refuse_locked)
    report = redact_tree(str(tmp_path))
    monkeypatch.undo()
    assert report["unprocessed"] == {"locked": "folder could not be read (Permission denied); removed from the bundle"}
    assert os.listdir(str(tmp_path)) == []


def test_a_decompression_bomb_is_removed_and_listed_never_written(tmp_path):
    # 64 KiB of gzip that expands to 16 MiB (one long line and many short ones): past the limit
    # the file is removed and listed, and nothing decompressed is left beside it.
    import gzip
    (tmp_path / "bomb.log.gz").write_bytes(gzip.compress(b"x" * (8 << 20) + b"\n" + b"password=p\n" * (800000)))
    (tmp_path / "small.log.gz").write_bytes(gzip.compress(b"password=p\n"))
    report = redact_tree(str(tmp_path), max_decompressed=1 << 20)
    assert sorted(os.listdir(str(tmp_path))) == ["small.log"]
    assert report["unprocessed"]["bomb.log.gz"].startswith("decompresses to more than 1048576 bytes")
    assert report["unprocessed"]["bomb.log.gz"].endswith("; removed from the bundle")
    assert report["decompressed"] == {"small.log.gz": "decompressed to small.log"}


def test_the_decompression_limit_reads_no_line_past_it(tmp_path):
    import gzip
    from ansible_collections.gpucloud.fleet.plugins.module_utils import redact

    class Counting(object):
        def __init__(self, data):
            self.inner, self.largest = gzip.GzipFile(fileobj=data), 0

        def readline(self, size=-1):
            line = self.inner.readline(size)
            self.largest = max(self.largest, len(line))
            return line

    import io
    source = Counting(io.BytesIO(gzip.compress(b"y" * (4 << 20))))
    try:
        redact._pump(source, redact.Redactor([]), None, (), 1000)
    except ValueError as exc:
        assert "more than 1000 bytes" in str(exc)
    else:
        raise AssertionError("a 4 MiB line passed a 1000-byte limit")
    assert source.largest <= 1001
