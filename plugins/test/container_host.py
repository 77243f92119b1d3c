# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: container_host.yml beside this file. Logic: plugin_utils/container_host.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import container_host as _container_host


def container_host(facts):
    try:
        return _container_host.is_container(facts)
    except _container_host.ContainerHostError as exc:
        raise AnsibleFilterError("container_host: %s" % exc) from exc


class TestModule(object):
    def tests(self):
        return {"container_host": container_host}
