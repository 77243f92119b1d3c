# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Conventions every module keeps (issue 29 item 7), read from the modules' source."""

import os
import re

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT

MODULES = os.path.join(ROOT, "plugins", "modules")
NAMES = sorted(name[:-3] for name in os.listdir(MODULES) if name.endswith(".py") and name != "__init__.py")

# Modules that still call run_command themselves: each belongs to another owner's change
# (ib_info: InfiniBand; disk_preflight, clevis_binding_status: disk encryption; compliance_evidence:
# its collect() moves with the compliance split). Remove a name when its module takes the Runner.
RUN_COMMAND_STILL_DIRECT = {"ib_info", "disk_preflight", "clevis_binding_status", "compliance_evidence"}


def _source(name):
    with open(os.path.join(MODULES, name + ".py")) as handle:
        return handle.read()


@pytest.mark.parametrize("name", NAMES)
def test_commands_run_through_the_runner(name):
    direct = "run_command(" in _source(name)
    if name in RUN_COMMAND_STILL_DIRECT:
        assert direct, "%s no longer calls run_command: take it off RUN_COMMAND_STILL_DIRECT" % name
    else:
        assert not direct, "%s calls module.run_command: run commands through module_utils/runner.py's Runner" % name


@pytest.mark.parametrize("name", NAMES)
def test_a_module_that_sets_facts_is_named_facts(name):
    sets_facts = re.search(r"\bansible_facts\s*=", _source(name)) is not None
    assert sets_facts == name.endswith("_facts"), (
        "%s: a module that returns ansible_facts is named *_facts, and only such a module" % name)
