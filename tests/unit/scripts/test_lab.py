# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""scripts/lab.py's node specs (what molecule/shared/create.yml passes it)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts"))

import lab  # noqa: E402  pylint: disable=wrong-import-position


def test_restart_policy_is_a_container_key_and_checked():
    lab.validate_specs([{"name": "n1", "image": "ubuntu2404", "restart": "always"}])
    lab.validate_specs([{"name": "n2", "image": "debian12"}])
    with pytest.raises(lab.LabError, match="restart must be one of no, always"):
        lab.validate_specs([{"name": "n3", "image": "debian12", "restart": "sometimes"}])
    with pytest.raises(lab.LabError, match="unknown keys restarts"):
        lab.validate_specs([{"name": "n4", "image": "debian12", "restarts": "always"}])
