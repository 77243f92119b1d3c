# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The disk_encryption role's decisions: which devices may be formatted, and
whether a LUKS volume's Clevis keyslot must be (re)bound.

Parsers and decisions are pure functions of captured command output.
Commands run through an injected ``run(argv, data=None) -> (rc, stdout, stderr)``
(``data`` goes to the command's standard input, byte for byte); the modules
``disk_preflight`` and ``clevis_binding_status`` are thin wrappers.
"""

import base64
import binascii
import json
import re

from ansible.module_utils.common.text.converters import to_bytes


class DiskEncryptionError(Exception):
    """A device must not be used, or cannot be checked."""


def _one_line(text):
    return " ".join((text or "").split())


# --- preflight: refuse to format what carries data -------------------------------------

def md_path(md_name):
    return "/dev/md/" + md_name


def devices_to_probe(volume_devices, md_devices, md_name, md_exists):
    """The devices whose signatures decide whether anything may be formatted.

    An array still to be created has no signature of its own: its members are
    probed instead (and the array's path, if a volume names it, is not).
    """
    pending = bool(md_devices) and not md_exists
    if not pending:
        return list(volume_devices)
    array = md_path(md_name)
    return [device for device in volume_devices if device != array] + list(md_devices)


def parse_wipefs_json(text):
    """``wipefs --json DEVICE`` (which only lists) as the signature types, in
    the order wipefs gives them, each once.

    Empty output means no signature (older util-linux prints nothing then).
    """
    text = (text or "").strip()
    if not text:
        return []
    try:
        data = json.loads(text)
        signatures = data["signatures"]
        types = [signature["type"] for signature in signatures]
    except (ValueError, KeyError, TypeError) as exc:
        raise DiskEncryptionError("cannot read wipefs --json output (%s): %r" % (exc, text[:200]))
    unique = []
    for kind in types:
        if kind not in unique:
            unique.append(kind)
    return unique


def unreadable_message(unreadable):
    """``unreadable`` is ``[(device, stderr), ...]``."""
    return "Cannot probe %s: no device was changed" % "; ".join(
        "%s (%s)" % (device, (stderr or "").strip()) for device, stderr in unreadable
    )


def refused_devices(signatures, volume_devices, allow_format):
    """The devices that carry a signature and may not be formatted, with their signatures.

    ``signatures`` maps each probed device to its signature types (in probe
    order). A device is allowed when it has no signature, is listed in
    ``allow_format``, or is a configured volume that already is LUKS (the
    role only binds and registers it then).
    """
    refused = []
    for device, types in signatures.items():
        existing_luks = device in volume_devices and "crypto_LUKS" in types
        if types and not existing_luks and device not in allow_format:
            refused.append((device, types))
    return refused


def refused_message(refused):
    return (
        "Refusing to format %s: the device carries a signature and is not listed in "
        "disk_encryption_allow_format. No device was changed. List it there only if its "
        "contents may be destroyed."
        % "; ".join("%s (%s)" % (device, ", ".join(types)) for device, types in refused)
    )


def preflight(run, wipefs, volume_devices, md_devices, md_name, allow_format, md_exists):
    """Probe every device and refuse any that would lose data.

    ``md_exists`` tells whether the array (``/dev/md/<md_name>``) is already
    there; it only matters when ``md_devices`` is not empty. Raises
    DiskEncryptionError with the operator-facing message; otherwise returns
    what the role's later steps use.
    """
    md_exists = bool(md_devices) and md_exists
    probe = devices_to_probe(volume_devices, md_devices, md_name, md_exists)
    answers = []
    for device in probe:
        rc, out, err = run([wipefs, "--json", device])
        answers.append((device, rc, out, err))
    unreadable = [(device, err) for device, rc, out, err in answers if rc != 0]
    if unreadable:
        raise DiskEncryptionError(unreadable_message(unreadable))
    signatures = {}
    for device, rc, out, err in answers:
        if device not in signatures:
            signatures[device] = parse_wipefs_json(out)
    refused = refused_devices(signatures, volume_devices, allow_format)
    if refused:
        raise DiskEncryptionError(refused_message(refused))
    return {
        "md_path": md_path(md_name),
        "md_exists": md_exists,
        "probed": probe,
        "signatures": signatures,
    }


# --- Tang servers: every one must answer with keys -----------------------------------

def tang_adv_url(server):
    """``GET`` address of a Tang server's advertisement (one trailing slash dropped)."""
    return (server[:-1] if server.endswith("/") else server) + "/adv"


def _b64url_json(text):
    text = text.replace("-", "+").replace("_", "/")
    return json.loads(base64.b64decode(text + "=" * ((4 - len(text) % 4) % 4)))


def adv_key_ops(body):
    """The ``key_ops`` of every key a Tang advertisement (a JWS whose payload is a JWK
    set) offers, or None when the body is not such an advertisement."""
    try:
        payload = json.loads(body)["payload"]
        keys = _b64url_json(payload)["keys"]
        ops = []
        for key in keys:
            ops.extend(key.get("key_ops", []))
        return ops
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        return None


def judge_tang_answers(answers):
    """``answers`` is ``[(server, status, body, msg), ...]`` (status -1: no answer).

    Returns ``(unreachable, keyless)``: the servers that did not answer 200, each
    as ``"server (why)"``, and those whose answer holds no signing (``verify``) and
    exchange (``deriveKey``) key.
    """
    unreachable, keyless = [], []
    for server, status, body, msg in answers:
        if status != 200:
            unreachable.append("%s (%s)" % (server, _one_line(msg) or "no answer"))
            continue
        ops = adv_key_ops(body) or []
        if "verify" not in ops or "deriveKey" not in ops:
            keyless.append(server)
    return unreachable, keyless


def tang_failure_message(unreachable, keyless):
    parts = ["Tang check failed before any device was touched."]
    if unreachable:
        parts.append("Unreachable or not answering /adv with 200: %s." % "; ".join(unreachable))
    if keyless:
        parts.append("No signing (verify) and exchange (deriveKey) key advertised by: %s." % ", ".join(keyless))
    parts.append("Every server in disk_encryption_tang_servers must answer, whatever disk_encryption_tang_threshold is.")
    return " ".join(parts)


def tang_check_mode_warning(unreachable):
    return (
        "check mode: not answering /adv now: %s. Nothing is touched in check mode; the real run stops "
        "here, before any device, unless every server in disk_encryption_tang_servers answers by then. "
        "A Tang server that this run sets up (site.yml's tang_server stage) answers once that stage has "
        "run for real." % "; ".join(unreachable)
    )


def tang_check(fetch, servers, check_mode):
    """Ask every server for its advertisement (``fetch(url) -> (status, body, msg)``).

    A server that answers without both keys fails in both modes; one that does not
    answer fails a real run and, in check mode (where a Tang server the same run sets
    up cannot answer yet), is only reported. Returns ``(unreachable, warning)``
    (``warning`` is None when every server answered); raises DiskEncryptionError with
    the operator-facing message.
    """
    answers = []
    for server in servers:
        status, body, msg = fetch(tang_adv_url(server))
        answers.append((server, status, body, msg))
    unreachable, keyless = judge_tang_answers(answers)
    if keyless or (unreachable and not check_mode):
        raise DiskEncryptionError(tang_failure_message(unreachable, keyless))
    return unreachable, tang_check_mode_warning(unreachable) if unreachable else None


# --- Clevis binding of a LUKS keyslot ---------------------------------------------------

_LIST_LINE = re.compile(r"^\s*(\d+):\s+(\S+)\s+'(.*)'\s*$")


def parse_clevis_luks_list(text):
    """``clevis luks list -d DEV [-s SLOT]``: one ``{"slot", "pin", "config"}`` per
    bound keyslot (``config`` is the pin's JSON configuration, parsed)."""
    bindings = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        match = _LIST_LINE.match(line)
        if not match:
            raise DiskEncryptionError("unexpected clevis luks list line: %r" % line)
        try:
            config = json.loads(match.group(3))
        except ValueError as exc:
            raise DiskEncryptionError("clevis luks list gave a configuration that is not JSON (%s): %r" % (exc, line))
        bindings.append({"slot": int(match.group(1)), "pin": match.group(2), "config": config})
    return bindings


def normalise_url(url):
    return url[:-1] if url.endswith("/") else url


def binding_matches(binding, servers, threshold):
    """Whether a keyslot's binding is exactly ``sss`` with ``threshold`` over the
    Tang pins ``servers`` (and no other pin); URLs compare without a trailing slash."""
    if binding is None or binding["pin"] != "sss":
        return False
    config = binding["config"]
    if not isinstance(config, dict):
        return False
    pins = config.get("pins") or {}
    tang = pins.get("tang") or []
    try:
        t = int(config.get("t"))
        urls = sorted(normalise_url(pin["url"]) for pin in tang)
    except (TypeError, ValueError, KeyError):
        return False
    return t == int(threshold) and urls == sorted(normalise_url(url) for url in servers) and len(pins) == 1


def parse_clevis_luks_report(rc, out, err):
    """``clevis luks report -q``: ``(rotated, thumbprints of the rotated keys)``.

    rc 0 means the binding's keys are all in the servers' advertisement; rc 1
    with "rotated" lists the keys that are not. Anything else (a server that
    does not answer) raises DiskEncryptionError.
    """
    if rc == 0:
        return False, []
    if "rotated" not in (out or ""):
        raise DiskEncryptionError(
            "clevis luks report failed (rc=%s): %s" % (rc, _one_line(err or out) or "no output")
        )
    keys = []
    for line in out.splitlines():
        line = line.strip()
        if line and "rotated" not in line:
            keys.append(line)
    return True, keys


def rebind_reason(bound, matches, rotated):
    """Why the Clevis keyslot must be (re)bound; empty when it is as wanted."""
    if not bound:
        return "not bound"
    if not matches:
        return "servers or threshold changed"
    if rotated:
        return "Tang keys rotated"
    return ""


def recovery_message(device, keyslot, rc):
    return (
        "%s is a LUKS volume whose keyslot %s (disk_encryption_recovery_keyslot) does not open with "
        "disk_encryption_recovery_passphrase (cryptsetup rc=%s). The role never rewrites keyslots it "
        "cannot prove; fix the passphrase or the keyslot number." % (device, keyslot, rc)
    )


def unlock_message(device, keyslot, servers, recovery_keyslot, rc):
    return (
        "Keyslot %s of %s did not unlock through %s (rc=%s); the recovery keyslot %s is unchanged."
        % (keyslot, device, ", ".join(servers), rc, recovery_keyslot)
    )


class ClevisBinding:
    """Check one LUKS volume's recovery keyslot and Clevis keyslot, changing nothing."""

    def __init__(self, run, cryptsetup="cryptsetup", clevis="clevis"):
        self.run = run
        self.cryptsetup = cryptsetup
        self.clevis = clevis

    def _test_passphrase(self, device, keyslot, secret):
        rc, out, err = self.run(
            [self.cryptsetup, "open", "--test-passphrase", "--key-slot", str(keyslot), "--key-file", "-", device],
            data=to_bytes(secret, errors="surrogate_or_strict"),
        )
        return rc

    def _unlocks(self, device, keyslot):
        """``clevis luks pass | cryptsetup open --test-passphrase``: the rc of the first that fails."""
        rc, key, err = self.run([self.clevis, "luks", "pass", "-d", device, "-s", str(keyslot)], binary=True)
        if rc != 0 or not key:
            # No key is no proof (and an empty stdin would not even reach cryptsetup).
            return rc or 1
        return self._test_passphrase(device, keyslot, key)

    def status(self, device, keyslot, servers, threshold, recovery_keyslot, recovery_passphrase,
               require_current=False):
        rc = self._test_passphrase(device, recovery_keyslot, recovery_passphrase)
        if rc != 0:
            raise DiskEncryptionError(recovery_message(device, recovery_keyslot, rc))

        rc, out, err = self.run([self.clevis, "luks", "list", "-d", device, "-s", str(keyslot)])
        # rc 1 and no output: nothing is bound to that keyslot.
        bindings = parse_clevis_luks_list(out) if rc == 0 else []
        binding = next((b for b in bindings if b["slot"] == int(keyslot)), None)
        bound = binding is not None
        matches = binding_matches(binding, servers, threshold)

        rotated, rotated_keys = False, []
        if matches:
            rc, out, err = self.run([self.clevis, "luks", "report", "-q", "-d", device, "-s", str(keyslot)])
            rotated, rotated_keys = parse_clevis_luks_report(rc, out, err)
        reason = rebind_reason(bound, matches, rotated)
        if reason and require_current:
            raise DiskEncryptionError(
                "keyslot %s of %s is still not as wanted after binding it: %s" % (keyslot, device, reason)
            )

        # A binding about to be replaced is not worth proving; the role checks the new one.
        unlocks = None
        if not reason:
            rc = self._unlocks(device, keyslot)
            if rc != 0:
                raise DiskEncryptionError(unlock_message(device, keyslot, servers, recovery_keyslot, rc))
            unlocks = True

        rc, out, err = self.run([self.cryptsetup, "luksUUID", device])
        if rc != 0:
            raise DiskEncryptionError("cryptsetup luksUUID %s failed (rc=%s): %s" % (device, rc, _one_line(err or out)))
        return {
            "bound": bound,
            "matches": matches,
            "binding": {"pin": binding["pin"], "config": binding["config"]} if bound else None,
            "rotated_keys": rotated_keys,
            "rebind_reason": reason,
            "unlocks": unlocks,
            "uuid": out.strip(),
        }
