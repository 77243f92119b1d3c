# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters over module_utils/mig_layout.py: the mig-parted config of a hardware profile."""


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout


def mig_parted_config(profile, gpu_model=None):
    """YAML text of the nvidia-mig-parted v1 config holding the profile's layout."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("mig_parted_config: the hardware profile must be a mapping")
    model = gpu_model or profile.get("gpu_model")
    family = mig_layout.family_of(model)
    try:
        if family is None:
            if profile.get("mig"):
                raise mig_layout.MigLayoutError("gpu_model %r is not a MIG GPU this collection knows (%s)"
                                                % (model, ", ".join(mig_layout.FAMILIES)))
            family = mig_layout.FAMILIES[0]
        return mig_layout.render_mig_parted_config(mig_layout.mig_parted_config(profile, family))
    except mig_layout.MigLayoutError as exc:
        raise AnsibleFilterError("mig_parted_config: %s" % exc) from exc


def mig_layout_name(profile):
    """The mig-parted config name of the profile's layout (all-disabled for mig: false)."""
    mig = (profile or {}).get("mig")
    return mig.get("layout") if isinstance(mig, dict) else "all-disabled"


class FilterModule:
    """MIG layout filters."""

    def filters(self):
        return {"mig_parted_config": mig_parted_config, "mig_layout_name": mig_layout_name}
