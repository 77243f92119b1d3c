# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A sysctl profile persisted in one sysctl.d file and applied where the kernel lets us.

Parsing and deciding are pure functions over text and plain data. The running
kernel is reached through a ``ProcSys`` (``read``, ``writable``, ``write``) and
the sysctl.d files through ``read_conf_dirs``; both take a root so tests run
them on captured data.
"""

import fnmatch
import os
import tempfile

# Where systemd-sysctl reads files from, highest priority first (sysctl.d(5)): a file in
# an earlier directory hides one of the same name in a later directory.
CONF_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")

MISSING = "not in this kernel"


class SysctlProfileError(Exception):
    """The profile cannot be written as asked."""


def canonical_key(key):
    """The dotted form of a sysctl key.

    sysctl.d(5): if the first separator is a slash, slashes separate levels and
    dots belong to names (``net/ipv4/conf/eth0.100/rp_filter`` is
    ``net.ipv4.conf.eth0/100.rp_filter`` in dotted form).
    """
    key = key.strip()
    for char in key:
        if char == "/":
            return key.translate(str.maketrans("./", "/."))
        if char == ".":
            break
    return key


def key_path(key):
    """The path of a dotted key below /proc/sys."""
    return canonical_key(key).translate(str.maketrans("./", "/."))


def render_value(value):
    """A profile value as sysctl prints it: booleans as 1/0, whitespace runs as one space."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return " ".join(str(value).split())


def check_settings(settings):
    """Canonical keys and rendered values; raises SysctlProfileError on what no file can hold."""
    if not isinstance(settings, dict) or not settings:
        raise SysctlProfileError("settings must be a non-empty mapping of sysctl keys to values")
    result = {}
    bad = []
    for key, value in settings.items():
        name = canonical_key(str(key))
        if (not name or any(char.isspace() for char in name) or "=" in name or name.startswith(("-", "#", ";"))
                or isinstance(value, (dict, list)) or value is None
                or any(char in str(value) for char in "\r\n") or render_value(value) == ""):
            bad.append(str(key))
            continue
        result[name] = render_value(value)
    if bad:
        raise SysctlProfileError("malformed sysctl keys or values: %s" % ", ".join(sorted(bad)))
    return result


def render(settings, comment=None):
    """The file's text: comment lines, then ``key = value`` sorted by key."""
    lines = ["# " + line if line else "#" for line in (comment or "").splitlines()]
    lines.extend("%s = %s" % (key, settings[key]) for key in sorted(settings))
    return "\n".join(lines) + "\n"


def parse_conf(text):
    """The assignments of a sysctl.d file, in order: ``[(key, value), ...]``.

    Comments start with ``#`` or ``;``; a leading ``-`` (ignore failures) is
    dropped; keys may be globs (``net.ipv4.conf.*.rp_filter``).
    """
    entries = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip().lstrip("-").strip()
        if key:
            entries.append((canonical_key(key), " ".join(value.split())))
    return entries


def boot_order(listing, conf_dirs=CONF_DIRS):
    """The files systemd-sysctl applies at boot, in order.

    ``listing`` maps each directory to the ``*.conf`` names in it. A name in a
    directory earlier in ``conf_dirs`` hides the same name later; files apply
    sorted by name, so for one key the last file wins.
    """
    chosen = {}
    for directory in conf_dirs:
        for name in listing.get(directory, ()):
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = os.path.join(directory, name)
    return [chosen[name] for name in sorted(chosen)]


def boot_values(order, contents):
    """For each key (or glob) set at boot, the value and file that win: ``{key: (value, path)}``."""
    result = {}
    for path in order:
        for key, value in parse_conf(contents.get(path, "")):
            result[key] = (value, path)
    return result


def overridden_at_boot(settings, path, order, contents):
    """Profile keys a file applied after ``path`` sets to another value.

    ``order`` and ``contents`` describe the host with the profile's file
    already in place. Returns ``{key: {"file": ..., "value": ...}}``.
    """
    if path not in order:
        return {}
    later = order[order.index(path) + 1:]
    result = {}
    for other in later:
        for pattern, value in parse_conf(contents.get(other, "")):
            for key, want in settings.items():
                if fnmatch.fnmatchcase(key, pattern) and value != want:
                    result[key] = {"file": other, "value": value}
                elif fnmatch.fnmatchcase(key, pattern):
                    result.pop(key, None)
    return result


def read_by_boot(path, conf_dirs=CONF_DIRS):
    """Whether systemd-sysctl reads ``path`` at boot (its directory is one of ``conf_dirs``)."""
    return path.endswith(".conf") and os.path.dirname(os.path.normpath(path)) in conf_dirs


def plan(settings, kernel):
    """What to write to the running kernel.

    ``kernel`` maps each key to ``{"value": str or None (missing), "writable": bool}``.
    Returns ``(apply, refused)``: keys whose value differs and may be written,
    and keys the kernel cannot take, with the reason.
    """
    apply = {}
    refused = {}
    for key in sorted(settings):
        want = settings[key]
        have = kernel[key]
        if have["value"] is None:
            refused[key] = MISSING
        elif have["value"] == want:
            continue
        elif have["writable"]:
            apply[key] = want
        else:
            refused[key] = "read-only here (is %s, profile %s)" % (have["value"], want)
    return apply, refused


def parse_sysctl_a(text):
    """``sysctl -a`` output as ``{key: value}`` (values with whitespace runs as one space)."""
    values = {}
    for line in (text or "").splitlines():
        if " = " in line:
            key, value = line.split(" = ", 1)
        elif line.endswith(" ="):
            key, value = line[:-2], ""
        else:
            continue
        values[key.strip()] = " ".join(value.split())
    return values


class ProcSys:
    """The running kernel's sysctl values below ``root`` (``/proc/sys``)."""

    def __init__(self, root="/proc/sys"):
        self.root = root

    def _path(self, key):
        return os.path.join(self.root, key_path(key))

    def read(self, key):
        """The value with whitespace runs as one space, or None when the kernel has no such key."""
        try:
            with open(self._path(key)) as handle:
                return " ".join(handle.read().split())
        except (IOError, OSError):
            return None

    def writable(self, key):
        # access(2) answers EROFS where /proc/sys is mounted read-only (containers).
        return os.access(self._path(key), os.W_OK)

    def write(self, key, value):
        with open(self._path(key), "w") as handle:
            handle.write(value + "\n")


def read_conf_dirs(conf_dirs=CONF_DIRS, root="/"):
    """``({dir: [names]}, {path: text})`` of the sysctl.d directories below ``root``.

    A directory that is the same as an earlier one (``/lib`` -> ``usr/lib``)
    is read once, as systemd does.
    """
    listing = {}
    contents = {}
    seen = set()
    for directory in conf_dirs:
        real = os.path.realpath(os.path.join(root, directory.lstrip("/")))
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        names = sorted(name for name in os.listdir(real) if name.endswith(".conf"))
        listing[directory] = names
        for name in names:
            try:
                with open(os.path.join(real, name)) as handle:
                    contents[os.path.join(directory, name)] = handle.read()
            except (IOError, OSError):
                # A dangling link or an unreadable file sets nothing at boot either.
                contents[os.path.join(directory, name)] = ""
    return listing, contents


def read_file(path):
    """A file's text, or None when it does not exist."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def write_file(path, text, mode=0o644):
    """Replace ``path`` atomically with ``text``, mode ``mode``, owned by root when run as root."""
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_as_root(path, text):
    write_file(path, text)
    if os.geteuid() == 0:
        os.chown(path, 0, 0)


def file_attributes_differ(path, mode=0o644):
    """Whether an existing file's mode (or, for root, its owner) differs from what is written."""
    try:
        status = os.stat(path)
    except OSError:
        return False
    wrong_owner = os.geteuid() == 0 and (status.st_uid, status.st_gid) != (0, 0)
    return (status.st_mode & 0o7777) != mode or wrong_owner


def ensure(settings, path, comment, apply, check_mode, proc, conf_dirs=CONF_DIRS, root="/", writer=None):
    """Bring ``path`` and the running kernel to the profile; returns the module's result.

    ``root`` prefixes every file path (tests); ``proc`` is a ``ProcSys``; ``writer(path, text)``
    replaces the file (default ``write_file``; the module passes one built on
    ``AnsibleModule.atomic_move``, which also gives the file its SELinux context).
    """
    settings = check_settings(settings)
    if not os.path.isabs(path):
        raise SysctlProfileError("path must be absolute: %s" % path)
    real_path = os.path.join(root, path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(real_path)):
        raise SysctlProfileError("the directory of %s does not exist" % path)

    text = render(settings, comment)
    before_text = read_file(real_path)
    file_changed = before_text != text
    attributes_changed = before_text is not None and file_attributes_differ(real_path)

    warnings = []
    listing, contents = read_conf_dirs(conf_dirs, root)
    if read_by_boot(path, conf_dirs):
        directory, name = os.path.split(path)
        listing.setdefault(directory, [])
        if name not in listing[directory]:
            listing[directory] = sorted(listing[directory] + [name])
        contents[path] = text
        order = boot_order(listing, conf_dirs)
        if path not in order:
            hiding = [other for other in order if os.path.basename(other) == name]
            warnings.append("%s is hidden at boot by %s of the same name" % (path, ", ".join(hiding)))
        overridden = overridden_at_boot(settings, path, order, contents)
    else:
        order = []
        overridden = {}
        warnings.append("%s is not in a sysctl.d directory (%s): it is not applied at boot"
                        % (path, ", ".join(conf_dirs)))
    if overridden:
        warnings.append(
            "sysctl files applied after %s at boot set other values, which win after a reboot: %s" % (
                path, ", ".join("%s=%s (%s)" % (key, item["value"], item["file"])
                                for key, item in sorted(overridden.items()))))

    kernel = dict((key, {"value": proc.read(key), "writable": proc.writable(key)}) for key in settings)
    if apply:
        to_apply, refused = plan(settings, kernel)
    else:
        to_apply, refused = {}, {}

    if not check_mode:
        if file_changed or attributes_changed:
            (writer or _write_as_root)(real_path, text)
        for key in sorted(to_apply):
            try:
                proc.write(key, to_apply[key])
            except (IOError, OSError) as exc:
                refused[key] = "write refused: %s" % (exc.strerror or exc)
        for key in list(to_apply):
            if key in refused:
                del to_apply[key]

    if refused:
        warnings.append("these values are in %s for the next boot but not in the running kernel: %s" % (
            path, "; ".join("%s: %s" % (key, refused[key]) for key in sorted(refused))))

    runtime_before = dict((key, kernel[key]["value"]) for key in sorted(to_apply))
    return {
        "changed": bool(file_changed or attributes_changed or to_apply),
        "path": path,
        "file_changed": bool(file_changed or attributes_changed),
        "settings": settings,
        "applied": to_apply,
        "not_applied": refused,
        "overridden_at_boot": overridden,
        "boot_order": order,
        "warnings": warnings,
        "diff": [
            {"before_header": path, "after_header": path,
             "before": before_text if before_text is not None else "", "after": text},
            {"before_header": "running kernel", "after_header": "running kernel",
             "before": "".join("%s = %s\n" % item for item in sorted(runtime_before.items())),
             "after": "".join("%s = %s\n" % item for item in sorted(to_apply.items()))},
        ],
    }
