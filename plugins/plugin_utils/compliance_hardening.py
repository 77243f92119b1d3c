# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Decisions of the host_hardening role that could lock the operator out or let a
background upgrade move a held package: pure functions, unit-tested."""


import re


SSH_CONNECTIONS = ("ssh", "paramiko", "paramiko_ssh", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh", "smart",
                   "ansible.netcommon.libssh", "libssh")
# What the hardened drop-in turns off (PasswordAuthentication no, KbdInteractiveAuthentication no).
DISABLED_METHODS = ("password", "keyboard-interactive")


def wildmatch(pattern, text):
    """sshd's match_pattern(): * any run, ? one character, everything else literal, case-sensitive.
    Greedy with one back-track point, so linear in practice and never exponential."""
    p = t = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]) and pattern[p] != "*":
            p, t = p + 1, t + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, t, p + 1
        elif star >= 0:
            mark += 1
            p, t = star + 1, mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def _entries(sshd, key):
    """The entries of an sshd -T list keyword (one line per entry or several on a line)."""
    return " ".join((sshd or {}).get(key) or []).split()


def _first(sshd, key, default=""):
    values = (sshd or {}).get(key) or []
    return values[0].strip() if values else default


def _user_matches(user, pattern):
    """AllowUsers/DenyUsers: USER or USER@HOST. The host part depends on where the login comes
    from, which the controller cannot know: only the user part is compared."""
    return wildmatch(pattern.split("@", 1)[0], user)


def parse_sshd_t_text(text):
    """`sshd -T` output as {keyword: [values]} (keywords lower case)."""
    out = {}
    for line in (text or "").splitlines():
        key, _sep, value = line.strip().partition(" ")
        if key and not key.startswith("#"):
            out.setdefault(key.lower(), []).append(value.strip())
    return out


def authentication_methods_problem(sshd):
    """Why the host's AuthenticationMethods cannot be met once passwords and keyboard-interactive
    are off (sshd -t then refuses the whole configuration); None when one list still can be.
    A list is usable when every method in it stays on: publickey always, hostbased and
    gssapi-with-mic where the host has them on."""
    value = _first(sshd, "authenticationmethods", "any")
    if value in ("", "any"):
        return None
    enabled = {"publickey"}
    if _first(sshd, "hostbasedauthentication") == "yes":
        enabled.add("hostbased")
    if _first(sshd, "gssapiauthentication") == "yes":
        enabled.add("gssapi-with-mic")
    lists = value.split()
    usable = [m for m in lists if all(part.split(":", 1)[0] in enabled for part in m.split(","))]
    if usable:
        return None
    needed = sorted({part.split(":", 1)[0] for m in lists for part in m.split(",")} & set(DISABLED_METHODS))
    return ("the host's sshd requires AuthenticationMethods %s, which needs %s; host_hardening turns %s off, "
            "so sshd -t would refuse the configuration and no login would be possible: allow a publickey-only "
            "method list first (e.g. AuthenticationMethods publickey) or set host_hardening_ssh: false"
            % (value, " or ".join(needed) or "a method that is off", " and ".join(DISABLED_METHODS)))


def ssh_lockout_problems(user, user_groups, allow_groups, permit_root_login, connection,
                         uses_password=False, authorized_keys_lines=None, sshd=None):
    """Why the hardened sshd would refuse the account this play logs in as; [] when it would not.

    user: the login account (`id -un` run without become, never the become user's facts);
    user_groups: its groups (`id -Gn USER`); allow_groups: the planned AllowGroups ([] = no
    AllowGroups line); connection: the play's connection plugin; authorized_keys_lines: the
    lines of its authorized keys files, or None when not read; sshd: the host's `sshd -T` as
    parse_sshd_t_text() returns it, or None when it could not be read.

    sshd's own order is followed (auth.c allowed_user): DenyUsers, AllowUsers, DenyGroups,
    AllowGroups. AllowGroups lines add up, so the hardened list is the host's plus the planned
    one. Only an SSH-borne connection can be cut off by sshd, but the user and group rules are
    checked for any connection: the next SSH run uses the same account.
    """
    problems = []
    groups = [g for g in (user_groups or []) if g]
    where = "the host's sshd configuration"
    for pattern in _entries(sshd, "denyusers"):
        if "@" not in pattern and wildmatch(pattern, user):
            problems.append("%s is refused by DenyUsers %s (%s)" % (user, pattern, where))
    allow_users = _entries(sshd, "allowusers")
    if allow_users and not any(_user_matches(user, p) for p in allow_users):
        problems.append("%s is in none of AllowUsers %s (%s): add it there before hardening sshd"
                        % (user, " ".join(allow_users), where))
    for pattern in _entries(sshd, "denygroups"):
        hit = [g for g in groups if wildmatch(pattern, g)]
        if hit:
            problems.append("%s's group %s is refused by DenyGroups %s (%s)" % (user, hit[0], pattern, where))
    host_allow = _entries(sshd, "allowgroups")
    effective = list(allow_groups or []) + host_allow if allow_groups else host_allow
    if effective and not any(wildmatch(p, g) for p in effective for g in groups):
        problems.append(
            "%s (groups: %s) is in none of host_hardening_ssh_allow_groups (%s)%s: add the account to one "
            "of them, or the group to the list, before hardening sshd"
            % (user, " ".join(sorted(set(groups))) or "none", ", ".join(allow_groups or []) or "none",
               " nor the host's AllowGroups %s" % " ".join(host_allow) if host_allow else ""))
    if user == "root" and permit_root_login == "no":
        problems.append("the play logs in as root and host_hardening_ssh_permit_root_login is 'no': "
                        "connect as an unprivileged user with become, or use prohibit-password")
    methods = authentication_methods_problem(sshd)
    if methods:
        problems.append(methods)
    over_ssh = connection in SSH_CONNECTIONS
    if over_ssh and uses_password:
        problems.append("the play logs in with a password (ansible_password), which the hardened sshd refuses: "
                        "install the key first")
    keys_elsewhere = any(_first(sshd, k, "none") not in ("", "none")
                         for k in ("authorizedkeyscommand", "trustedusercakeys"))
    if over_ssh and not uses_password and authorized_keys_lines is not None and not keys_elsewhere:
        keys = [line for line in authorized_keys_lines
                if line.strip() and not line.lstrip().startswith("#")]
        if not keys:
            problems.append("%s has no key in its authorized keys files, and password logins are about to end: "
                            "it would lose its only way in" % user)
    return problems


def authorized_keys_files(sshd, user, home):
    """The files sshd reads USER's keys from (AuthorizedKeysFile with %h, %u and %% expanded,
    relative to HOME), as sshd -T lists them; sshd's default when it lists none."""
    entries = _entries(sshd, "authorizedkeysfile") or [".ssh/authorized_keys", ".ssh/authorized_keys2"]
    out = []
    for entry in entries:
        if entry == "none":
            continue
        tokens = re.findall(r"%(.?)", entry)
        if any(t not in ("%", "h", "u") for t in tokens):
            continue  # a token the controller cannot expand (%U: the uid): not read
        path = re.sub(r"%([%hu])", lambda m: {"%": "%", "h": home, "u": user}[m.group(1)], entry)
        out.append(path if path.startswith("/") else "%s/%s" % (home.rstrip("/"), path))
    return out


def unattended_blacklist(held, prefixes):
    """Unattended-Upgrade::Package-Blacklist entries (regular expressions, which
    unattended-upgrades matches against package names) for every held package and every
    name prefix, sorted and without duplicates."""
    entries = set()
    for name in held or []:
        name = name.strip().split(":", 1)[0]
        if name:
            entries.add("^%s$" % re.escape(name))
    for prefix in prefixes or []:
        prefix = prefix.strip()
        if prefix:
            entries.add("^%s" % re.escape(prefix))
    return sorted(entries)
