# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: dpkg_missing.yml beside this file.


from ansible.errors import AnsibleFilterError

# The format the roles ask dpkg-query for: status abbreviation, package, version.
QUERY_FORMAT = "${db:Status-Abbrev}|${Package}|${Version}\\n"


def _parse(stdout):
    """{package: version} of the packages dpkg reports as installed (status 'ii')."""
    installed = {}
    for line in (stdout or "").splitlines():
        parts = line.split("|")
        if len(parts) != 3:
            continue
        status, package, version = (p.strip() for p in parts)
        # "ii" = wanted install, installed; "hi" = on hold, installed. Half-installed,
        # config-files only and unpacked states are not installed.
        if len(status) >= 2 and status[1] == "i" and status[0] in "ih":
            installed[package.split(":", 1)[0]] = version
    return installed


def dpkg_missing(stdout, wanted):
    """The entries of WANTED (names, or name=version) that dpkg-query's STDOUT does not show installed."""
    if isinstance(wanted, str) or not isinstance(wanted, (list, tuple)):
        raise AnsibleFilterError("dpkg_missing: the wanted packages must be a list of names "
                                 "(name or name=version), got %r" % (wanted,))
    if stdout is not None and not isinstance(stdout, str):
        raise AnsibleFilterError("dpkg_missing: expected dpkg-query's stdout (a string), got %s"
                                 % type(stdout).__name__)
    installed = _parse(stdout)
    missing = []
    for item in wanted:
        if not isinstance(item, str) or not item.strip():
            raise AnsibleFilterError("dpkg_missing: package entry %r is not a package name" % (item,))
        name, sep, version = item.strip().partition("=")
        name = name.split(":", 1)[0]
        have = installed.get(name)
        if have is None:
            missing.append(item)
        elif sep and not (have == version or (version.endswith("*") and have.startswith(version[:-1]))):
            missing.append(item)
    return missing


class FilterModule(object):
    def filters(self):
        return {"dpkg_missing": dpkg_missing}
