# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The Grafana dashboards of roles/grafana_dashboards are valid dashboards and keep the house rules.

No Grafana server runs in CI. The dashboards are validated against JSON Schemas generated
from the TypeScript types of a pinned @grafana/schema (tests/fixtures/grafana/, made by
scripts/grafana-schema.sh; this test needs no npm), and checked for what the schema cannot
say: every query goes through the `datasource` template variable, uids are unique and stable,
queries use the metric contract's names (docs/monitoring-contract.md) and join on `node` /
`gpu`, never `instance`. Their PromQL runs against a real Prometheus in test_dashboard_promql.py.
"""

import copy
import json
import os
import re
import sys

import jsonschema
import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import xid
from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, run_playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "grafana_dashboards")
DASHBOARDS = os.path.join(ROLE, "files", "dashboards")
SCHEMAS = os.path.join(ROOT, "tests", "fixtures", "grafana")
CONTRACT = os.path.join(ROOT, "docs", "monitoring-contract.md")

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NAMES = sorted(name for name in os.listdir(DASHBOARDS) if name.endswith(".json"))


def _load(path):
    with open(path) as handle:
        return json.load(handle)


DASHBOARD_SCHEMA = _load(os.path.join(SCHEMAS, "dashboard.schema.json"))


def _panel_schema(panel_type, part):
    path = os.path.join(SCHEMAS, "panels", "%s.%s.schema.json" % (panel_type, part))
    return _load(path) if os.path.exists(path) else None


def _dashboard(name):
    return _load(os.path.join(DASHBOARDS, name))


def _panels(panels):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _exprs(dashboard):
    for panel in _panels(dashboard.get("panels") or []):
        for target in panel.get("targets") or []:
            yield panel, target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield variable, variable["query"]["query"]


def _errors(schema, instance):
    return sorted("%s: %s" % (error.json_path, error.message[:300])
                  for error in jsonschema.Draft7Validator(schema).iter_errors(instance))


def test_the_dashboards_are_there():
    assert NAMES == ["gpucloud-fleet-overview.json", "gpucloud-node-gpu.json"]


def test_the_schemas_are_valid_json_schemas():
    for path in [os.path.join(SCHEMAS, "dashboard.schema.json")] + [
            os.path.join(SCHEMAS, "panels", name) for name in os.listdir(os.path.join(SCHEMAS, "panels"))
            if name.endswith(".schema.json")]:
        schema = _load(path)
        assert schema["$schema"] == "http://json-schema.org/draft-07/schema#", path
        jsonschema.Draft7Validator.check_schema(schema)
        assert os.path.exists(path + ".source"), path


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_validates_against_the_grafana_schema(name):
    assert _errors(DASHBOARD_SCHEMA, _dashboard(name)) == []


@pytest.mark.parametrize("name", NAMES)
def test_panel_options_validate_against_their_plugin_schema(name):
    """options and fieldConfig.defaults.custom of every panel, and every custom.* override value."""
    problems = []
    for panel in _panels(_dashboard(name)["panels"]):
        if panel["type"] == "row":
            continue
        options = _panel_schema(panel["type"], "options")
        assert options is not None, "panel %r: no schema for panel type %s" % (panel["title"], panel["type"])
        problems += ["%s options %s" % (panel["title"], e) for e in _errors(options, panel.get("options", {}))]
        custom = _panel_schema(panel["type"], "fieldconfig")
        if custom is None:
            assert not panel["fieldConfig"]["defaults"].get("custom"), panel["title"]
            continue
        problems += ["%s custom %s" % (panel["title"], e)
                     for e in _errors(custom, panel["fieldConfig"]["defaults"].get("custom", {}))]
        properties = custom["definitions"]["FieldConfig"]["properties"]
        for override in panel["fieldConfig"]["overrides"]:
            for prop in override["properties"]:
                if prop["id"].startswith("custom."):
                    key = prop["id"][len("custom."):]
                    assert key in properties, "%s: override of unknown custom.%s" % (panel["title"], key)
                    problems += ["%s override %s %s" % (panel["title"], prop["id"], e)
                                 for e in _errors(properties[key], prop["value"])]
    assert problems == []


MUTATIONS = [
    # (id, change, what the schema must say)
    ("refresh-number", lambda d: d.__setitem__("refresh", 30), "30 is not of type 'string'"),
    ("schema-version-string", lambda d: d.__setitem__("schemaVersion", "42"), "is not of type 'number'"),
    ("unknown-top-level-key", lambda d: d.__setitem__("refesh", "1m"), "'refesh' was unexpected"),
    ("variable-type-unknown", lambda d: d["templating"]["list"][0].__setitem__("type", "prometheus"),
     "is not one of"),
    ("gridpos-without-height", lambda d: d["panels"][1]["gridPos"].pop("h"), None),
    ("threshold-without-color", lambda d: d["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"][0].pop("color"),
     None),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case,mutate,message", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_schema_refuses_a_broken_copy(name, case, mutate, message):
    broken = copy.deepcopy(_dashboard(name))
    mutate(broken)
    errors = _errors(DASHBOARD_SCHEMA, broken)
    assert errors, "%s: the schema accepted the broken copy" % case
    if message:
        assert any(message in error for error in errors), errors


def test_the_panel_schemas_refuse_a_broken_panel():
    panel = next(p for p in _panels(_dashboard("gpucloud-node-gpu.json")["panels"]) if p["type"] == "timeseries")
    options = copy.deepcopy(panel["options"])
    options["legend"]["displayMode"] = "sideways"
    assert _errors(_panel_schema("timeseries", "options"), options)
    custom = dict(panel["fieldConfig"]["defaults"]["custom"], lineWidth="thick")
    assert _errors(_panel_schema("timeseries", "fieldconfig"), custom)


def test_schema_version_is_the_pinned_packages():
    with open(os.path.join(SCHEMAS, "dashboard.schema.json.source")) as handle:
        pinned = int(re.search(r"^schemaVersion: (\d+)", handle.read(), re.M).group(1))
    for name in NAMES:
        assert _dashboard(name)["schemaVersion"] == pinned, name


@pytest.mark.parametrize("name", NAMES)
def test_every_query_uses_the_datasource_variable(name):
    dashboard = _dashboard(name)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in _panels(dashboard["panels"]):
        if panel["type"] == "row":
            assert "targets" not in panel, panel["title"]
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, (panel["title"], target["refId"])
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]


def test_uids_are_unique_and_stable():
    uids = {name: _dashboard(name)["uid"] for name in NAMES}
    assert len(set(uids.values())) == len(uids), uids
    for name, uid in uids.items():
        # Grafana: 1-40 characters of letters, digits, - and _; the file is named after it.
        assert re.match(r"^[A-Za-z0-9_-]{1,40}$", uid), uid
        assert name == uid + ".json"


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_house_rules(name):
    dashboard = _dashboard(name)
    assert isinstance(dashboard["refresh"], str) and dashboard["refresh"] in dashboard["timepicker"]["refresh_intervals"]
    assert "id" not in dashboard or dashboard["id"] is None, "provisioned dashboards carry no instance-local id"
    assert "gpucloud" in dashboard["tags"]
    ids = [panel["id"] for panel in _panels(dashboard["panels"])]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    cells = set()
    for panel in _panels(dashboard["panels"]):
        assert panel.get("title"), panel["id"]
        if panel["type"] != "row":
            assert panel.get("description"), panel["title"]
            refs = [target["refId"] for target in panel["targets"]]
            assert len(refs) == len(set(refs)), panel["title"]
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, "panel %r overlaps another at %d,%d" % (panel["title"], x, y)
                cells.add((x, y))
    for link in dashboard["links"]:
        uid = re.match(r"^/d/([^/]+)/", link["url"]).group(1)
        assert uid + ".json" in NAMES, link["url"]


def test_drill_down_variables():
    variables = {v["name"]: v for v in _dashboard("gpucloud-node-gpu.json")["templating"]["list"]}
    assert list(variables) == ["datasource", "profile", "node", "gpu"]
    assert variables["gpu"]["multi"] and variables["gpu"]["includeAll"] and variables["gpu"]["allValue"] == ".*"
    assert not variables["node"]["multi"]


def _contract_names():
    with open(CONTRACT) as handle:
        text = handle.read()
    names = set(re.findall(r"\b(DCGM_FI_DEV_[A-Z0-9_]+|gpucloud_[a-z0-9_]+[a-z0-9]|[a-z]+:gpucloud_[a-z0-9_]+:[a-z]+)\b", text))
    return names | {"up"}


METRIC = re.compile(r"\b(DCGM_FI_DEV_[A-Z0-9_]+|gpucloud_[a-z0-9_]+|[a-zA-Z_]+:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+|up(?=\{))")


@pytest.mark.parametrize("name", NAMES)
def test_queries_use_the_contract_names_and_join_on_node(name):
    contract = _contract_names()
    for where, expr in _exprs(_dashboard(name)):
        title = where.get("title") or where.get("name")
        used = set(METRIC.findall(expr))
        assert used, (title, expr)
        assert used <= contract, "%s: not in docs/monitoring-contract.md: %s" % (title, sorted(used - contract))
        assert "instance" not in expr, "%s: group and join on node / gpu, never instance" % title
        for on in re.findall(r"\bon\s*\(([^)]*)\)", expr):
            assert "node" in [label.strip() for label in on.split(",")], "%s: on (%s) without node" % (title, on)
        for by in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            labels = [label.strip() for label in by.split(",")]
            # per GPU means per node and GPU, except where the query already picked one node
            if "gpu" in labels and 'node="$node"' not in expr:
                assert "node" in labels, "%s: by (%s) without node" % (title, by)


def _xid_codes(expr):
    return sorted(int(code) for code in re.findall(r"DCGM_FI_DEV_XID_ERRORS\{[^}]*\} == (\d+)", expr))


def test_xid_classes_follow_the_collections_xid_table():
    overview = _dashboard("gpucloud-fleet-overview.json")
    hardware = sorted(code for code, (_m, kind, _a) in xid.XID_CODES.items() if kind == "hw")
    application = sorted(code for code, (_m, kind, _a) in xid.XID_CODES.items() if kind == "app")
    by_title = {panel["title"]: panel for panel in _panels(overview["panels"])}
    assert _xid_codes(by_title["GPUs with a hardware Xid"]["targets"][0]["expr"]) == hardware
    assert _xid_codes(next(p for t, p in by_title.items() if t.startswith("Xid needing action"))
                      ["targets"][0]["expr"]) == hardware
    assert _xid_codes(next(p for t, p in by_title.items() if t.startswith("Application Xids"))
                      ["targets"][0]["expr"]) == application
    # the fatal classes are among them
    assert {48, 63, 64, 74, 79, 94, 95} <= set(hardware)


def test_datasource_uid_token_is_the_roles_default():
    """The role replaces the default uid in the datasource variable's current value; nowhere else may it appear."""
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        default_uid = yaml.safe_load(handle)["grafana_dashboards_datasource_uid"]
    for name in NAMES:
        with open(os.path.join(DASHBOARDS, name)) as handle:
            text = handle.read()
        assert text.count('"%s"' % default_uid) == 2, name
        current = {v["name"]: v for v in json.loads(text)["templating"]["list"]}["datasource"]["current"]
        assert current == {"text": default_uid, "value": default_uid}, name


# ---------------------------------------------------------------------------------------------
# The role itself, on this machine (connection local) with every path in a temporary directory:
# check mode changes nothing, the first run provisions, the second changes nothing. No Grafana
# and no systemd here, so the restart handler is never reached (it needs a running service).


def _play(tmp, **extra):
    variables = {
        "grafana_dashboards_provisioning_dir": str(tmp / "provisioning"),
        "grafana_dashboards_dir": str(tmp / "dashboards"),
        "grafana_dashboards_datasource_uid": "lab-prometheus",
        "grafana_dashboards_datasource_url": "http://monitor-1.lab:9090",
    }
    variables.update(extra)
    return [{"name": "Provision", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "roles": [{"role": "gpucloud.fleet.grafana_dashboards", "vars": variables}]}]


def _ansible(tmp, plays, *args):
    playbook = tmp / "play.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    run = run_playbook(tmp, playbook, args=args,
                       env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_NOCOLOR="1"))
    recap = re.search(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", run.stdout)
    return run, (int(recap.group(2)) if recap else None)


def _files(tmp):
    return sorted(str(path.relative_to(tmp)) for path in tmp.rglob("*") if path.is_file() and path.name != "play.yml")


@pytest.mark.skipif(os.geteuid() != 0, reason="the role writes files owned by root")
def test_role_check_mode_then_provision_then_nothing_to_do(tmp_path):
    run, changed = _ansible(tmp_path, _play(tmp_path), "--check", "--diff")
    assert run.returncode == 0, run.stdout[-4000:]
    assert changed and changed >= 4, run.stdout[-4000:]
    assert _files(tmp_path) == [], "check mode wrote files"

    run, changed = _ansible(tmp_path, _play(tmp_path))
    assert run.returncode == 0 and changed >= 4, run.stdout[-4000:]
    assert _files(tmp_path) == ["dashboards/gpucloud-fleet-overview.json", "dashboards/gpucloud-node-gpu.json",
                                "provisioning/dashboards/gpucloud-fleet.yaml",
                                "provisioning/datasources/gpucloud-fleet.yaml"]

    run, changed = _ansible(tmp_path, _play(tmp_path))
    assert run.returncode == 0 and changed == 0, run.stdout[-4000:]
    run, changed = _ansible(tmp_path, _play(tmp_path), "--check")
    assert run.returncode == 0 and changed == 0, run.stdout[-4000:]

    datasource = yaml.safe_load((tmp_path / "provisioning/datasources/gpucloud-fleet.yaml").read_text())
    assert datasource == {"apiVersion": 1, "datasources": [{
        "name": "gpucloud Prometheus", "uid": "lab-prometheus", "type": "prometheus", "access": "proxy", "orgId": 1,
        "url": "http://monitor-1.lab:9090", "isDefault": False, "editable": False,
        "jsonData": {"httpMethod": "POST", "timeInterval": "15s"}}]}
    provider = yaml.safe_load((tmp_path / "provisioning/dashboards/gpucloud-fleet.yaml").read_text())
    assert provider == {"apiVersion": 1, "providers": [{
        "name": "gpucloud-fleet", "orgId": 1, "folder": "GPU fleet", "folderUid": "gpucloud-fleet", "type": "file",
        "disableDeletion": False, "updateIntervalSeconds": 30, "allowUiUpdates": False,
        "options": {"path": str(tmp_path / "dashboards"), "foldersFromFilesStructure": False}}]}
    for name in NAMES:
        written = json.loads((tmp_path / "dashboards" / name).read_text())
        shipped = _dashboard(name)
        variables = {v["name"]: v for v in written["templating"]["list"]}
        assert variables["datasource"]["current"] == {"text": "lab-prometheus", "value": "lab-prometheus"}
        variables["datasource"]["current"] = {v["name"]: v for v in shipped["templating"]["list"]}["datasource"]["current"]
        assert written == shipped, "only the data source picker's start value may differ"
    assert (tmp_path / "provisioning/datasources/gpucloud-fleet.yaml").stat().st_mode & 0o777 == 0o640

    # A dashboard taken off the list is removed, so that Grafana deletes it.
    run, changed = _ansible(tmp_path, _play(tmp_path, grafana_dashboards_dashboards=["gpucloud-fleet-overview"]))
    assert run.returncode == 0 and changed == 1, run.stdout[-4000:]
    assert not (tmp_path / "dashboards" / "gpucloud-node-gpu.json").exists()


@pytest.mark.parametrize("variables,words", [
    ({"grafana_dashboards_datasource_uid": "has space"}, ["grafana_dashboards_datasource_uid"]),
    ({"grafana_dashboards_datasource_url": "monitor-1:9090"}, ["grafana_dashboards_datasource_url"]),
    ({"grafana_dashboards_install": True}, ["grafana_dashboards_mirror_url", "not in Debian"]),
    ({"grafana_dashboards_version": 12.3}, ["grafana_dashboards_version", "quoted"]),
    ({"grafana_dashboards_dashboards": ["gpucloud-fleet-overview", "nvidia-smi"]}, ["nvidia-smi"]),
], ids=["uid", "url", "install-without-mirror", "version-float", "unknown-dashboard"])
def test_role_refuses_bad_settings_before_any_change(tmp_path, variables, words):
    run, _changed = _ansible(tmp_path, _play(tmp_path, **variables))
    assert run.returncode != 0, run.stdout[-4000:]
    for word in words:
        assert word in run.stdout, run.stdout[-4000:]
    assert _files(tmp_path) == []


MIRROR_KEY = """-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEZ0000BYJKwYBBAHaRw8BAQdAplaceholderplaceholderplaceholderAAAA
=AAAA
-----END PGP PUBLIC KEY BLOCK-----"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the role's install tasks ask for root")
def test_role_install_in_check_mode_reports_and_writes_nothing(tmp_path):
    """The install path in check mode on this machine: it says what it would do and touches nothing."""
    sources = "/etc/apt/sources.list.d/gpucloud-grafana.sources"
    assert not os.path.exists(sources)
    run, changed = _ansible(tmp_path, _play(tmp_path, grafana_dashboards_install=True,
                                            grafana_dashboards_mirror_url="http://mirror.lab/grafana/deb",
                                            grafana_dashboards_mirror_key=MIRROR_KEY,
                                            grafana_dashboards_version="12.3.1"), "--check", "--diff")
    assert run.returncode == 0, run.stdout[-4000:]
    assert changed >= 6, run.stdout[-4000:]
    if os.path.exists("/etc/debian_version"):
        # gpucloud.fleet.packages_present's diff: what check mode would install.
        assert "-grafana (not installed)\n+grafana 12.3.1" in run.stdout
        assert "URIs: http://mirror.lab/grafana/deb" in run.stdout
        assert "Signed-By: /etc/apt/keyrings/gpucloud-grafana.asc" in run.stdout
    assert not os.path.exists(sources) and not os.path.exists("/etc/apt/keyrings/gpucloud-grafana.asc")
    assert _files(tmp_path) == []
