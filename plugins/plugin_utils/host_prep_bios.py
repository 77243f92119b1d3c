# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The BIOS attributes host_prep patches through the BMC (Redfish), from what the BMC reports.

Pending settings (the BIOS resource's @Redfish.Settings object) win over current values:
they are what the next reset applies. Values compare as lower-case strings, since Redfish
attribute registries mix "true", true, "10" and 10. Pure: no Ansible objects.
"""

from collections.abc import Mapping


class BiosPlanError(ValueError):
    """The profile or the BMC's answer cannot give a BIOS plan."""


def _same(left, right):
    return str(left).lower() == str(right).lower()


def bios_plan(wanted, current, settings=None):
    """What to patch to bring the BIOS to WANTED.

    wanted: host_prep_bios_attributes; current: the BMC's current attributes; settings: the
    attributes of the pending-settings object, or None/anything else when there is none.
    Returns {"unknown": sorted names the BMC lacks, "pending": the settings that differ from
    the current values, "to_patch": the wanted values that the current or pending ones miss}.
    Nothing is to patch while an attribute is unknown: the caller refuses the whole profile.
    """
    if not isinstance(wanted, Mapping):
        raise BiosPlanError("host_prep_bios_attributes must be a mapping attribute -> value, got %s"
                            % type(wanted).__name__)
    if not isinstance(current, Mapping):
        raise BiosPlanError("the BMC's current BIOS attributes must be a mapping, got %s" % type(current).__name__)
    if not isinstance(settings, Mapping):
        settings = {}
    pending = dict((k, v) for k, v in settings.items() if k in current and not _same(v, current[k]))
    unknown = sorted(str(k) for k in wanted if k not in current)
    to_patch = {}
    if not unknown:
        for name, value in wanted.items():
            effective = pending[name] if name in pending else current[name]
            if not _same(effective, value):
                to_patch[name] = value
    return {"unknown": unknown, "pending": pending, "to_patch": to_patch}
