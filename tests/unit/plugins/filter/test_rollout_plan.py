# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.rollout import rollout_plan


def test_plan_through_the_filter():
    result = rollout_plan(["a1", "a2", "h1"], ["a", "h"], {"a": ["a1", "a2"], "h": ["h1"], "all": []}, [1, "25%"])
    assert result["order"] == ["a1", "h1", "a2"]
    assert result["serial"] == [2, "25%"]


@pytest.mark.parametrize("args, message", [
    (("a1", ["a"], {"a": ["a1"]}, 1), "list of hosts"),
    ((["a1"], "a", {"a": ["a1"]}, 1), "gpucloud_profile_groups"),
    ((["a1"], ["a"], ["a1"], 1), "groups must be a mapping"),
    ((["a1"], ["a"], {"a": ["a1"]}, "0"), "serial entry"),
    ((["a1"], ["h"], {"a": ["a1"], "h": []}, 1), "exactly one"),
])
def test_bad_input_is_a_filter_error(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        rollout_plan(*args)
