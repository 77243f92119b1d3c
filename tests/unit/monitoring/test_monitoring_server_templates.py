# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/monitoring_server: its files rendered from a sample inventory and read by the real tools.

ansible-playbook runs the role's validate, targets and config task files on two local
"monitoring servers" (connection local) whose paths point into a temporary directory: first in
check mode (nothing may be written), then for real (the template module's validate option runs
promtool check config / amtool check-config before each file is written), then again (nothing
may change). The files are then checked once more with promtool and amtool directly. A second
playbook feeds validate.yml bad settings and records which task refused them.
"""


import grp
import ipaddress
import json
import os
import pwd
import random
import re
import shutil
import stat
import subprocess
import sys

import jinja2
import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, case_play, run_cases, run_playbook

ROLE = "gpucloud.fleet.monitoring_server"
SECRET = "T0KEN-must-never-be-logged"
SMTP_SECRET = "smtp-pass-must-never-be-logged"
# Visible ASCII with the characters YAML and JSON escape or read specially.
TOKEN = 'bearer-T0KEN"must\\never:be#logged'
TOKEN_TAIL = "never:be#logged"


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.fail("%s is not installed: scripts/setup.sh installs it (requirements/monitoring.deb)" % name)
    return path


def _profile(name):
    return {"gpucloud_profile": {"name": name, "gpu_count": 8}}


def _private(out):
    """The role's private paths and owners, pointed into OUT.

    Passed as extra variables: the role's vars/main.yml outranks every inventory variable, and
    the paths it holds are this machine's real /etc/prometheus and /etc/default files.
    """
    my_group = grp.getgrgid(os.getegid()).gr_name
    return {
        "__monitoring_server_prometheus_config": out + "/{{ inventory_hostname }}/prometheus.yml",
        "__monitoring_server_alertmanager_config": out + "/{{ inventory_hostname }}/alertmanager.yml",
        "__monitoring_server_prometheus_defaults": out + "/{{ inventory_hostname }}/default-prometheus",
        "__monitoring_server_alertmanager_defaults": out + "/{{ inventory_hostname }}/default-alertmanager",
        "__monitoring_server_promtool": _tool("promtool"),
        "__monitoring_server_amtool": _tool("amtool"),
        "__monitoring_server_owner": pwd.getpwuid(os.geteuid()).pw_name,
        "__monitoring_server_owner_group": my_group,
        "__monitoring_server_group": my_group,
    }


def _inventory(out):
    monitoring = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "monitoring_server_manage_services": False,
        "monitoring_server_rules_dir": out + "/{{ inventory_hostname }}/rules",
    }
    return {"all": {"children": {
        "gpu_nodes": {"children": {
            "h100_sxm": {"vars": _profile("h100_sxm"), "hosts": {
                # dcgm named explicitly.
                "gpu-h100-001": {"ansible_host": "10.20.3.11", "gpu_monitoring_gpu_source": "dcgm"},
                # auto (the default) with a DCGM version in the lock: dcgm.
                "gpu-h100-002": {"ansible_host": "10.20.3.12",
                                 "gpucloud_version_lock": {"driver": "580.159.04", "dcgm": "4.4.0"}},
            }},
            "a100_80g_pcie": {"vars": _profile("a100_80g_pcie"), "hosts": {
                "gpu-a100p-001": {"ansible_host": "10.20.1.11", "gpu_monitoring_gpu_source": "collector"},
                # auto without a DCGM version: the collector; an IPv6 address.
                "gpu-a100p-002": {"ansible_host": "fd00:20::12"},
                # Scraped on another network than Ansible's; dcgm turned off by the override.
                "gpu-a100p-003": {"ansible_host": "10.20.1.13", "monitoring_server_target_address": "10.30.1.13",
                                  "gpu_monitoring_gpu_source": "dcgm", "monitoring_server_scrape_dcgm": False},
            }},
        }},
        "monitoring_servers": {"vars": monitoring, "hosts": {
            "mon-webhook": {
                "monitoring_server_receiver": "webhook",
                "monitoring_server_webhook_url": "https://hooks.example.net/services/" + SECRET,
            },
            # ansible-rulebook's eda.builtin.webhook source with a token (the remediation rulebook).
            "mon-webhook-token": {
                "monitoring_server_receiver": "webhook",
                "monitoring_server_webhook_url": "http://eda.example.net:5000/alertmanager",
                "monitoring_server_webhook_bearer_token": TOKEN,
                "monitoring_server_group_by": ["alertname", "profile"],
            },
            "mon-email": {
                "monitoring_server_receiver": "email",
                "monitoring_server_email_to": "gpu-oncall@example.net",
                "monitoring_server_email_from": "prometheus@example.net",
                "monitoring_server_email_smarthost": "smtp.example.net:587",
                "monitoring_server_email_auth_username": "prometheus",
                "monitoring_server_email_auth_password": SMTP_SECRET,
                "monitoring_server_retention_time": "90d",
                "monitoring_server_retention_size": "400GB",
                "monitoring_server_nvidia_smi_compat": True,
                "monitoring_server_external_labels": {"fleet": "example"},
                "monitoring_server_prometheus_external_url": "https://prometheus.example.net/",
                "monitoring_server_prometheus_extra_args": ["--query.timeout=2m"],
            },
        }},
    }}}


PLAY = [{
    "name": "Render the monitoring server's files",
    "hosts": "monitoring_servers",
    "gather_facts": False,
    "tasks": [
        {"name": "Validate", "ansible.builtin.include_role": {"name": ROLE, "tasks_from": "validate", "public": True}},
        # Never the machine's own /etc files.
        {"name": "Require every path in the output directory", "ansible.builtin.assert": {"that": [
            "item is string and item.startswith(__out ~ '/')"], "quiet": True},
         "loop": ["{{ __monitoring_server_prometheus_config }}", "{{ __monitoring_server_alertmanager_config }}",
                  "{{ __monitoring_server_prometheus_defaults }}", "{{ __monitoring_server_alertmanager_defaults }}",
                  "{{ monitoring_server_rules_dir }}"]},
        {"name": "Targets", "ansible.builtin.include_role": {"name": ROLE, "tasks_from": "targets"}},
        {"name": "Output directory", "ansible.builtin.file": {
            "path": "{{ __monitoring_server_prometheus_config | dirname }}", "state": "directory", "mode": "0755"}},
        {"name": "Config", "ansible.builtin.include_role": {"name": ROLE, "tasks_from": "config"}},
    ],
}]


def _env():
    return ansible_env(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")


def _playbook(work, inventory, playbook, *args):
    run = run_playbook(work, playbook, inventory, ["--diff"] + list(args), env=_env())
    return run.returncode, run.stdout


def _recap(output):
    """{host: {ok, changed, failed, ...}} from the PLAY RECAP."""
    recap = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M):
        recap[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return recap


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    work = tmp_path_factory.mktemp("monitoring_server")
    out = str(work / "out")
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump(_inventory(out), sort_keys=False))
    playbook = work / "render.yml"
    playbook.write_text(yaml.safe_dump(PLAY, sort_keys=False))
    private = work / "private.json"
    private.write_text(json.dumps(dict(_private(out), __out=out)))
    extra = ["-e", "@" + str(private)]
    runs = {
        "check": _playbook(work, inventory, playbook, "--check", *extra),
        "check_wrote": os.path.exists(os.path.join(out, "mon-webhook")),
    }
    runs["first"] = _playbook(work, inventory, playbook, *extra)
    runs["second"] = _playbook(work, inventory, playbook, *extra)
    for name in ("check", "first", "second"):
        assert runs[name][0] == 0, "%s run failed:\n%s" % (name, runs[name][1][-6000:])
    runs["out"] = out
    return runs


def _load(rendered, host, name):
    with open(os.path.join(rendered["out"], host, name)) as handle:
        return handle.read()


def _jobs(rendered, host):
    config = yaml.safe_load(_load(rendered, host, "prometheus.yml"))
    return {job["job_name"]: job for job in config["scrape_configs"]}, config


def _targets(job):
    return {static["labels"]["node"]: (static["targets"], static["labels"]) for static in job["static_configs"]}


def test_check_mode_reports_changes_and_writes_nothing(rendered):
    assert not rendered["check_wrote"]
    recap = _recap(rendered["check"][1])
    assert recap["mon-webhook"]["changed"] > 0 and recap["mon-email"]["changed"] > 0


def test_second_run_changes_nothing(rendered):
    recap = _recap(rendered["second"][1])
    for host in ("mon-webhook", "mon-webhook-token", "mon-email"):
        assert recap[host]["changed"] == 0, rendered["second"][1][-4000:]


def test_secrets_never_in_the_output(rendered):
    for name in ("check", "first", "second"):
        assert SECRET not in rendered[name][1]
        assert SMTP_SECRET not in rendered[name][1]
        # Also as JSON would escape it.
        assert TOKEN not in rendered[name][1] and TOKEN_TAIL not in rendered[name][1]


def test_alertmanager_yml_task_logs_and_diffs_nothing():
    """The file holds the webhook URL, its bearer token and the SMTP password: the task must keep
    no_log and diff off (the check-mode run above passes --diff)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "monitoring_server", "tasks",
                           "config.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (task,) = [t for t in tasks if t.get("ansible.builtin.template", {}).get("src") == "alertmanager.yml.j2"]
    assert task["no_log"] is True and task["diff"] is False


def test_node_job_has_every_gpu_node_with_node_and_profile_labels(rendered):
    jobs, _config = _jobs(rendered, "mon-webhook")
    assert _targets(jobs["node"]) == {
        "gpu-a100p-001": (["10.20.1.11:9100"], {"node": "gpu-a100p-001", "profile": "a100_80g_pcie"}),
        "gpu-a100p-002": (["[fd00:20::12]:9100"], {"node": "gpu-a100p-002", "profile": "a100_80g_pcie"}),
        "gpu-a100p-003": (["10.30.1.13:9100"], {"node": "gpu-a100p-003", "profile": "a100_80g_pcie"}),
        "gpu-h100-001": (["10.20.3.11:9100"], {"node": "gpu-h100-001", "profile": "h100_sxm"}),
        "gpu-h100-002": (["10.20.3.12:9100"], {"node": "gpu-h100-002", "profile": "h100_sxm"}),
    }


def test_dcgm_job_only_where_dcgm_exporter_runs(rendered):
    jobs, _config = _jobs(rendered, "mon-webhook")
    assert _targets(jobs["dcgm"]) == {
        "gpu-h100-001": (["10.20.3.11:9400"], {"node": "gpu-h100-001", "profile": "h100_sxm"}),
        "gpu-h100-002": (["10.20.3.12:9400"], {"node": "gpu-h100-002", "profile": "h100_sxm"}),
    }


def test_rules_alerting_and_retention(rendered):
    jobs, config = _jobs(rendered, "mon-email")
    assert config["rule_files"] == [os.path.join(rendered["out"], "mon-email", "rules", "*.rules.yml")]
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["localhost:9093"]
    assert config["global"]["external_labels"] == {"fleet": "example"}
    assert set(jobs) == {"prometheus", "alertmanager", "node", "dcgm"}
    args = _load(rendered, "mon-email", "default-prometheus")
    assert re.search(r'^ARGS="[^"\n]*--storage\.tsdb\.retention\.time=90d[^"\n]*"$', args, re.M)
    assert "--storage.tsdb.retention.size=400GB" in args
    assert "--web.external-url=https://prometheus.example.net/" in args and "--query.timeout=2m" in args
    assert "--storage.tsdb.retention.time=30d" in _load(rendered, "mon-webhook", "default-prometheus")
    assert "retention.size" not in _load(rendered, "mon-webhook", "default-prometheus")
    # An empty value: no HA gossip port.
    assert re.search(r'--cluster\.listen-address=[ "]', _load(rendered, "mon-webhook", "default-alertmanager"))


def test_compat_rules_only_where_asked(rendered):
    compat = "gpucloud-nvidia-smi-compat.rules.yml"
    assert compat in os.listdir(os.path.join(rendered["out"], "mon-email", "rules"))
    assert compat not in os.listdir(os.path.join(rendered["out"], "mon-webhook", "rules"))


@pytest.mark.parametrize("host", ["mon-webhook", "mon-email"])
def test_promtool_accepts_prometheus_yml_and_its_rules(rendered, host):
    run = subprocess.run([_tool("promtool"), "check", "config", os.path.join(rendered["out"], host, "prometheus.yml")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert run.returncode == 0, run.stdout
    # The glob found the collection's rule files and promtool read them.
    assert "gpucloud-alerts.rules.yml" in run.stdout and "SUCCESS" in run.stdout, run.stdout


@pytest.mark.parametrize("host,receiver", [("mon-webhook", "webhook_configs"), ("mon-webhook-token", "webhook_configs"),
                                           ("mon-email", "email_configs")])
def test_amtool_accepts_alertmanager_yml(rendered, host, receiver):
    path = os.path.join(rendered["out"], host, "alertmanager.yml")
    run = subprocess.run([_tool("amtool"), "check-config", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False)
    assert run.returncode == 0, run.stdout
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    config = yaml.safe_load(_load(rendered, host, "alertmanager.yml"))
    (only,) = config["receivers"]
    assert only["name"] == config["route"]["receiver"] == "gpucloud"
    assert list(only) == ["name", receiver]


def test_webhook_and_email_settings_reach_alertmanager(rendered):
    webhook = yaml.safe_load(_load(rendered, "mon-webhook", "alertmanager.yml"))
    assert webhook["receivers"][0]["webhook_configs"] == [
        {"url": "https://hooks.example.net/services/" + SECRET, "send_resolved": True}]
    assert webhook["route"]["group_by"] == ["alertname", "node"]
    email = yaml.safe_load(_load(rendered, "mon-email", "alertmanager.yml"))
    assert email["global"]["smtp_smarthost"] == "smtp.example.net:587"
    assert email["global"]["smtp_auth_password"] == SMTP_SECRET
    assert email["receivers"][0]["email_configs"] == [{"to": "gpu-oncall@example.net", "send_resolved": True}]


def test_bearer_token_reaches_the_webhook_receiver(rendered):
    """With a token: http_config.authorization, the token read back byte for byte (amtool accepts
    the file above); without one (mon-webhook): no http_config at all."""
    config = yaml.safe_load(_load(rendered, "mon-webhook-token", "alertmanager.yml"))
    assert config["receivers"][0]["webhook_configs"] == [{
        "url": "http://eda.example.net:5000/alertmanager", "send_resolved": True,
        "http_config": {"authorization": {"type": "Bearer", "credentials": TOKEN}}}]
    assert config["route"]["group_by"] == ["alertname", "profile"]
    assert "http_config" not in _load(rendered, "mon-webhook", "alertmanager.yml")
    assert "http_config" not in _load(rendered, "mon-email", "alertmanager.yml")


ADDRESSES = "Require scrape addresses without a port"
TOKEN_RECEIVER = "Require the webhook receiver for a webhook bearer token"
TOKEN_WORD = "Require a webhook bearer token of visible ASCII characters on one line"
WEBHOOK = {"monitoring_server_receiver": "webhook", "monitoring_server_webhook_url": "http://eda.example.net:5000/am"}
# GPU node groups of the refusal cases: {group: {host: its variables}}.
ADDRESS_GROUPS = {
    "addr_v4_port": {"gpu-v4-port": {"monitoring_server_target_address": "10.30.1.99:9100"}},
    "addr_v6_port": {"gpu-v6-port": {"monitoring_server_target_address": "[fd00::99]:9100"}},
    "addr_v6_brackets": {"gpu-v6-brackets": {"monitoring_server_target_address": "[fd00::99]"}},
    "addr_host_port": {"gpu-host-port": {"monitoring_server_target_address": "gpu-1.example.net:9100"}},
    "addr_ansible_host_port": {"gpu-ah-port": {"ansible_host": "10.30.1.7:22"}},
    "addr_newline": {"gpu-newline": {"monitoring_server_target_address": "10.30.1.99\n"}},
    "addr_bad_v4": {"gpu-bad-v4": {"monitoring_server_target_address": "10.30.1.999"}},
    "addr_good": {"gpu-v4": {"monitoring_server_target_address": "10.30.1.99"},
                  "gpu-v6": {"monitoring_server_target_address": "fd00::9100"},
                  "gpu-v6-mapped": {"monitoring_server_target_address": "::ffff:10.30.1.9"},
                  "gpu-name": {"monitoring_server_target_address": "gpu-1.example.net"},
                  "gpu-ah": {"ansible_host": "10.30.1.8"},
                  "gpu-plain": {}},
}

# (case id, settings, task expected to refuse them, words its message must hold, words it must not)
BAD = [
    ("webhook-without-url", {"monitoring_server_receiver": "webhook"},
     "Require a webhook URL for the webhook receiver", ["monitoring_server_webhook_url", "empty"], []),
    ("webhook-url-with-space", {"monitoring_server_receiver": "webhook",
                                "monitoring_server_webhook_url": "https://h/x " + SECRET},
     "Require a webhook URL for the webhook receiver", ["monitoring_server_webhook_url", "not shown"], [SECRET]),
    ("email-without-smarthost", {"monitoring_server_receiver": "email", "monitoring_server_email_to": "a@b",
                                 "monitoring_server_email_from": "p@b"},
     "Require recipient, sender and SMTP relay for the email receiver", ["monitoring_server_email_smarthost"], []),
    ("retention-in-words", {"monitoring_server_retention_time": "30 days"},
     "Require Prometheus durations", ["monitoring_server_retention_time", "30 days"], []),
    ("retention-size-unit", {"monitoring_server_retention_size": "400G"},
     "Require a TSDB size limit in Prometheus units", ["monitoring_server_retention_size"], []),
    ("extra-arg-with-space", {"monitoring_server_prometheus_extra_args": ["--web.page-title=GPU fleet"]},
     "Require extra flags as single --flag=value words", ["monitoring_server_prometheus_extra_args"], []),
    ("label-name", {"monitoring_server_external_labels": {"fleet-name": "x"}},
     "Require valid label names", ["monitoring_server_external_labels", "fleet-name"], []),
    ("empty-gpu-group", {"monitoring_server_gpu_nodes_group": "no_such_group"},
     "Require GPU nodes to scrape", ["monitoring_server_gpu_nodes_group", "no_such_group"], []),
    # Issue 28 item 16: an address that carries a port is refused by name (the role adds the port).
    ("address-ipv4-port", {"monitoring_server_gpu_nodes_group": "addr_v4_port"}, ADDRESSES,
     ["monitoring_server_target_address of gpu-v4-port is \"10.30.1.99:9100\"", "without a port"], []),
    ("address-ipv6-port", {"monitoring_server_gpu_nodes_group": "addr_v6_port"}, ADDRESSES,
     ["monitoring_server_target_address of gpu-v6-port is \"[fd00::99]:9100\""], []),
    ("address-ipv6-brackets", {"monitoring_server_gpu_nodes_group": "addr_v6_brackets"}, ADDRESSES,
     ["monitoring_server_target_address of gpu-v6-brackets is \"[fd00::99]\""], []),
    ("address-host-port", {"monitoring_server_gpu_nodes_group": "addr_host_port"}, ADDRESSES,
     ["monitoring_server_target_address of gpu-host-port is \"gpu-1.example.net:9100\""], []),
    ("address-ansible-host-port", {"monitoring_server_gpu_nodes_group": "addr_ansible_host_port"}, ADDRESSES,
     ["ansible_host of gpu-ah-port is \"10.30.1.7:22\""], []),
    ("address-newline", {"monitoring_server_gpu_nodes_group": "addr_newline"}, ADDRESSES,
     ["monitoring_server_target_address of gpu-newline is \"10.30.1.99\\n\""], []),
    ("address-bad-ipv4", {"monitoring_server_gpu_nodes_group": "addr_bad_v4"}, ADDRESSES,
     ["monitoring_server_target_address of gpu-bad-v4 is \"10.30.1.999\""], []),
    ("addresses-bare", {"monitoring_server_gpu_nodes_group": "addr_good"}, None, [], []),
    # Issue 28 item 13: every check ends where the string ends ('$' lets a trailing newline through).
    ("group-by-newline", {"monitoring_server_group_by": ["alertname\n"]},
     "Require valid label names", ["monitoring_server_group_by"], []),
    ("external-label-newline", {"monitoring_server_external_labels": {"fleet\n": "x"}},
     "Require valid label names", ["monitoring_server_external_labels"], []),
    ("duration-newline", {"monitoring_server_scrape_interval": "15s\n"},
     "Require Prometheus durations", ["monitoring_server_scrape_interval"], []),
    ("retention-size-newline", {"monitoring_server_retention_size": "400GB\n"},
     "Require a TSDB size limit in Prometheus units", ["monitoring_server_retention_size"], []),
    ("extra-arg-newline", {"monitoring_server_prometheus_extra_args": ["--web.page-title=x\n"]},
     "Require extra flags as single --flag=value words", ["monitoring_server_prometheus_extra_args"], []),
    ("external-url-newline", {"monitoring_server_prometheus_external_url": "https://prom.example.net/\n"},
     "Require http(s) external URLs", ["monitoring_server_prometheus_external_url"], []),
    ("email-from-newline", {"monitoring_server_receiver": "email", "monitoring_server_email_to": "a@example.net",
                            "monitoring_server_email_from": "p@example.net\nBcc: x@example.net",
                            "monitoring_server_email_smarthost": "smtp.example.net:25"},
     "Require recipient, sender and SMTP relay for the email receiver", ["monitoring_server_email_from"], []),
    # The webhook's bearer token: only with the webhook receiver, one word of visible ASCII, never shown.
    ("token-with-receiver-none", {"monitoring_server_webhook_bearer_token": TOKEN}, TOKEN_RECEIVER,
     ["monitoring_server_webhook_bearer_token", "monitoring_server_receiver", "'none'"], [TOKEN_TAIL]),
    ("token-with-receiver-email", {"monitoring_server_receiver": "email", "monitoring_server_email_to": "a@example.net",
                                   "monitoring_server_email_from": "p@example.net",
                                   "monitoring_server_email_smarthost": "smtp.example.net:25",
                                   "monitoring_server_webhook_bearer_token": TOKEN}, TOKEN_RECEIVER,
     ["monitoring_server_webhook_bearer_token", "monitoring_server_receiver", "'email'"], [TOKEN_TAIL]),
    ("token-newline", dict(WEBHOOK, monitoring_server_webhook_bearer_token=TOKEN + "\n"), TOKEN_WORD,
     ["monitoring_server_webhook_bearer_token", "not shown"], [TOKEN_TAIL]),
    ("token-inner-newline", dict(WEBHOOK, monitoring_server_webhook_bearer_token="abc\r\nX-Injected: 1"), TOKEN_WORD,
     ["monitoring_server_webhook_bearer_token"], ["X-Injected"]),
    ("token-space", dict(WEBHOOK, monitoring_server_webhook_bearer_token="two words"), TOKEN_WORD,
     ["monitoring_server_webhook_bearer_token"], ["two words"]),
    ("token-tab", dict(WEBHOOK, monitoring_server_webhook_bearer_token="abc\tdef"), TOKEN_WORD,
     ["monitoring_server_webhook_bearer_token"], []),
    ("token-non-ascii", dict(WEBHOOK, monitoring_server_webhook_bearer_token="t\u00f6ken"), TOKEN_WORD,
     ["monitoring_server_webhook_bearer_token"], []),
    ("token-good", dict(WEBHOOK, monitoring_server_webhook_bearer_token=TOKEN), None, [], []),
    ("good", {"monitoring_server_receiver": "email", "monitoring_server_email_to": "a@example.net",
              "monitoring_server_email_from": "p@example.net", "monitoring_server_email_smarthost": "[fd00::25]:25"},
     None, [], []),
]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    work = tmp_path_factory.mktemp("monitoring_server_validate")
    plays = [case_play(case_id, "monitoring_server", settings) for case_id, settings, _task, _words, _hidden in BAD]
    inventory = work / "inventory.yml"
    children = dict({"gpu_nodes": {"hosts": {"gpu-1": {}}}},
                    **{group: {"hosts": hosts} for group, hosts in ADDRESS_GROUPS.items()})
    inventory.write_text(yaml.safe_dump({"all": {"children": children, "hosts": {
        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return run_cases(work, plays, inventory, env=_env())


@pytest.mark.parametrize("case_id,settings,task,words,hidden", BAD, ids=[case[0] for case in BAD])
def test_validate_refuses_by_name(refusals, case_id, settings, task, words, hidden):
    outcomes, output = refusals
    outcome = outcomes[case_id]
    assert outcome["task"] == task, outcome
    for word in words:
        assert word in outcome["msg"], outcome
    for word in hidden:
        assert word not in outcome["msg"] and word not in output


def _address_patterns():
    """The role's address patterns as Ansible templates them (plain Jinja: join and replace only)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "monitoring_server", "vars",
                           "main.yml")) as handle:
        role_vars = yaml.safe_load(handle)
    ipv6 = jinja2.Environment(autoescape=False).from_string(role_vars["__monitoring_server_ipv6_pattern"]).render(role_vars)
    return re.compile(role_vars["__monitoring_server_ipv4_pattern"]), re.compile(ipv6)


def _is_address(kind, text):
    try:
        (ipaddress.IPv4Address if kind == 4 else ipaddress.IPv6Address)(text)
    except ValueError:
        return False
    return "%" not in text


def test_address_patterns_agree_with_python_ipaddress():
    """The scrape-address patterns accept exactly what Python's ipaddress does (no IPv6 zones), on
    fixed cases and 20,000 seeded random strings of each family."""
    ipv4, ipv6 = _address_patterns()
    rng = random.Random(28)
    samples = ["::", "::1", "1::", "fd00::9100", "10.30.1.99:9100", "[fd00::1]:9100", "gpu1:9100", "::ffff:10.0.0.1",
               "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1::2::3", "1:2:3:4:5:6:1.2.3.4", "1::1.2.3.4", "fe80::1%eth0",
               "01.2.3.4", "1.2.3.4\n", "::1\n", "10.30.1.999", "255.255.255.255", "256.1.1.1"]
    for _round in range(20000):
        parts = [format(rng.randint(0, 0xffff), "x")[:rng.randint(1, 4)] for _group in range(rng.randint(0, 8))]
        text = ":".join(parts)
        if parts and rng.random() < 0.5:
            cut = rng.randint(0, len(parts))
            text = ":".join(parts[:cut]) + "::" + ":".join(parts[cut:])
        if rng.random() < 0.2:
            text += ":" + ".".join(str(rng.randint(0, 300)) for _octet in range(4))
        samples.append(text)
        samples.append(".".join(str(rng.choice([rng.randint(0, 300), "0%d" % rng.randint(0, 9)]))
                                for _octet in range(rng.randint(3, 5))))
    wrong = [(kind, text) for text in samples for kind, pattern in ((4, ipv4), (6, ipv6))
             if bool(pattern.match(text)) != _is_address(kind, text)]
    assert wrong == []
