# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read and judge the JSON that ``dcgmi diag -r <level> -j`` prints (issue 30, item 1).

Pure functions, no Ansible objects: text in, plain data out, ``ValueError`` with a message
that names what is wrong. The layout is the one DCGM 4.x's ``dcgmi`` writes
(NVIDIA/DCGM ``dcgmi/Diag.cpp``, ``HelperJsonBuildOutput``; tests use real captures in
``tests/fixtures/dcgm_diag/``)::

    {"DCGM Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [
            {"name": "software",
             "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                          "status": "Fail", "warnings": [{"warning": "...", "error_id": 29}],
                          "info": ["..."]}],
             "test_summary": {"status": "Fail", "info": ["..."]}}]}]},
     "entity_groups": [{"entity_group": "GPU", "entities": [{"entity_id": 0, ...}]}],
     "metadata": {"version": "4.2.3", "Driver Version Detected": "580.82.09"}}

``dcgmi`` leaves out ``results`` when no entity ran a test and ``test_summary`` when the
test did not run at all; a run that could not start is ``{"DCGM Diagnostic":
{"version": ..., "runtime_error": ...}}``. DCGM 3.x wrote another layout (``"DCGM GPU
Diagnostic"``, ``gpu_id`` per result): no real capture of it was found to test against,
so it is refused by name rather than guessed at.

It runs on the node, imported by the gpu_diagnostics module (module_utils/gpu_diagnostics.py
runs ``dcgmi`` and hands its output here).
"""


import json

# The words dcgmi prints for a result (Diag::HelperDisplayDiagResult) and what they mean
# here. "Not Run" is an entity or test that did not run: listed as skipped.
STATUS_WORDS = {"Pass": "pass", "Fail": "fail", "Warn": "warn", "Skip": "skip", "Not Run": "skip"}

# The collection's level names and the suite numbers ``dcgmi diag -r`` takes: the one mapping
# (NVIDIA's dcgmi-diag reference, docs.nvidia.com/datacenter/dcgm/latest/reference/
# command-line-reference/dcgmi/dcgmi-diag.html: "The names quick and short, medium, long, and
# xlong are aliases for levels 1 through 4"; dcgmi has no "extended", so a caller passes the number).
LEVELS = {
    # r1, seconds, deployment checks only (driver, libraries, permissions, persistence, NVML
    # answers): before a job, where a node must not be held up.
    "quick": 1,
    # r2, minutes, adds the PCIe, memory and short stress tests: a periodic sweep of idle
    # nodes, often enough to find a GPU going bad and short enough to run on many nodes.
    "medium": 2,
    # r3, tens of minutes, adds the targeted stress/power, memory bandwidth and diagnostic
    # plugins: before a node returns from repair, where the node is out of service anyway.
    "long": 3,
    # r4, hours, adds the extended memory and pulse tests: an RMA decision or a
    # node that keeps failing, where the time is cheaper than a wrong verdict.
    "extended": 4,
}
DCGMI_ALIASES = {"short": 1, "xlong": 4}

_V4_KEY = "DCGM Diagnostic"
_V3_KEY = "DCGM GPU Diagnostic"
_GPU_GROUP = "GPU"


def level_number(name):
    """The ``dcgmi diag -r`` suite number (1-4) of a named level, or of a number 1-4."""
    if isinstance(name, int) and not isinstance(name, bool):
        if 1 <= name <= 4:
            return name
    elif isinstance(name, str):
        if name in LEVELS:
            return LEVELS[name]
        if name in DCGMI_ALIASES:
            return DCGMI_ALIASES[name]
        if name in ("1", "2", "3", "4"):
            return int(name)
    raise ValueError("diagnostic level %r is not one of %s (or dcgmi's %s, or a number 1-4)"
                     % (name, ", ".join(sorted(LEVELS, key=LEVELS.get)),
                        ", ".join(sorted(DCGMI_ALIASES))))


def _document(text):
    if not isinstance(text, str):
        raise ValueError("dcgmi diag output must be text, not %s" % type(text).__name__)
    if not text.strip():
        raise ValueError("dcgmi diag printed nothing (was -j given, and did dcgmi reach nv-hostengine?)")
    try:
        document = json.loads(text)
    except ValueError as exc:
        if text.lstrip().startswith(("{", "[")):
            raise ValueError("dcgmi diag output is not valid JSON (%s): %r" % (exc, text.strip()[:200])) from exc
        # dcgmi may print a line of its own (a notice, an error) before the document; the
        # document then starts a later line, and nothing but white space may follow it.
        start = text.find("\n{")
        if start < 0:
            raise ValueError("dcgmi diag output holds no JSON document: %r" % text.strip()[:200]) from exc
        try:
            document = json.loads(text[start + 1:])
        except ValueError as inner:
            raise ValueError("dcgmi diag output is not valid JSON after its first line (%s): %r"
                             % (inner, text.strip()[:200])) from inner
    if not isinstance(document, dict):
        raise ValueError("dcgmi diag JSON is a %s, not an object" % type(document).__name__)
    return document


def _text_list(value, where):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("%s: 'info' must be a list of strings" % where)
    return list(value)


def _warnings(value, where):
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("%s: 'warnings' must be a list" % where)
    messages = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("warning"), str):
            raise ValueError("%s: every warning must be an object with a 'warning' text" % where)
        messages.append(item["warning"])
    return messages


def _status(value, where):
    if value not in STATUS_WORDS:
        raise ValueError("%s: status %r is not one dcgmi prints (%s)"
                         % (where, value, ", ".join(sorted(STATUS_WORDS))))
    return STATUS_WORDS[value]


def _entity(result, where):
    group, entity_id = result.get("entity_group"), result.get("entity_id")
    if not isinstance(group, str) or not isinstance(entity_id, int) or isinstance(entity_id, bool) \
            or entity_id < 0:
        raise ValueError("%s: a result needs 'entity_group' (text) and 'entity_id' (a number >= 0)" % where)
    return entity_id if group == _GPU_GROUP else "%s%d" % (group, entity_id)


def _test(category, raw, where):
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ValueError("%s: every test needs a 'name'" % where)
    name = raw["name"]
    where = "%s, test %r" % (where, name)
    results = raw.get("results", [])
    if not isinstance(results, list):
        raise ValueError("%s: 'results' must be a list" % where)
    entities = {}
    for result in results:
        if not isinstance(result, dict):
            raise ValueError("%s: every result must be an object" % where)
        key = _entity(result, where)
        if key in entities:
            raise ValueError("%s: two results for %s" % (where, key))
        entities[key] = {
            "status": _status(result.get("status"), "%s, entity %s" % (where, key)),
            "messages": _warnings(result.get("warnings"), where),
            "info": _text_list(result.get("info"), where),
        }
    summary = raw.get("test_summary")
    if summary is None:
        # No summary: dcgmi leaves it out when the test did not run.
        status, messages, info = "skip", [], []
    elif isinstance(summary, dict):
        status = _status(summary.get("status"), "%s, test_summary" % where)
        messages = _warnings(summary.get("warnings"), where)
        info = _text_list(summary.get("info"), where)
    else:
        raise ValueError("%s: 'test_summary' must be an object" % where)
    return {"name": name, "category": category, "status": status, "messages": messages, "info": info,
            "gpus": dict((k, v) for k, v in entities.items() if isinstance(k, int)),
            "other_entities": dict((k, v) for k, v in entities.items() if not isinstance(k, int))}


def _listed_gpus(document):
    groups = document.get("entity_groups", [])
    if not isinstance(groups, list):
        raise ValueError("'entity_groups' must be a list")
    gpus = []
    for group in groups:
        if isinstance(group, dict) and group.get("entity_group") == _GPU_GROUP:
            for entity in group.get("entities") or []:
                if isinstance(entity, dict) and isinstance(entity.get("entity_id"), int):
                    gpus.append(entity["entity_id"])
    return gpus


def parse(text, level=None):
    """The diagnostic in ``dcgmi diag -j`` output TEXT, as plain data.

    LEVEL (a level name or number, optional) is recorded as its suite number: the JSON does
    not say which suite ran. Returns ``{"version", "driver", "level", "tests": [{"name",
    "category", "status", "messages", "info", "gpus": {id: {"status", "messages", "info"}},
    "other_entities": {...}}], "gpus": [ids]}`` with statuses pass, fail, warn or skip.
    """
    document = _document(text)
    number = None if level is None else level_number(level)
    if _V3_KEY in document and _V4_KEY not in document:
        raise ValueError("this is a DCGM 3.x document (%r); only the DCGM 4.x layout (%r) is read"
                         % (_V3_KEY, _V4_KEY))
    body = document.get(_V4_KEY)
    if not isinstance(body, dict):
        raise ValueError("no %r object in the dcgmi diag JSON (keys: %s)"
                         % (_V4_KEY, ", ".join(sorted(document)) or "none"))
    if body.get("runtime_error"):
        raise ValueError("dcgmi diag did not run: %s" % body["runtime_error"])
    categories = body.get("test_categories")
    if not isinstance(categories, list) or not categories:
        raise ValueError("%r holds no 'test_categories': no test ran" % _V4_KEY)
    tests = []
    for category in categories:
        if not isinstance(category, dict) or not isinstance(category.get("category"), str) \
                or not isinstance(category.get("tests"), list):
            raise ValueError("every entry of 'test_categories' needs a 'category' name and a 'tests' list")
        for raw in category["tests"]:
            tests.append(_test(category["category"], raw, "category %r" % category["category"]))
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    gpus = set(_listed_gpus(document))
    for test in tests:
        gpus.update(test["gpus"])
    return {"version": metadata.get("version"), "driver": metadata.get("Driver Version Detected"),
            "level": number, "tests": tests, "gpus": sorted(gpus)}


def _entry(gpu, test, messages, fallback):
    return {"gpu": gpu, "test": test["name"], "message": "; ".join(messages) if messages else fallback}


def judge(parsed, gpu_ids=None):
    """The verdict on a :func:`parse` result: ``{"passed", "failures", "warnings", "skipped"}``.

    A test that failed on any GPU fails the run, as does a failure DCGM tied to no GPU
    (the test's summary says Fail and no entity result does) and, when GPU_IDS names the
    GPUs that were asked for, a GPU without any result. A warning does not fail the run; a
    skipped test or GPU is listed. A run in which nothing ran (every test skipped)
    verified nothing and does not pass. GPU_IDS limits the verdict to those GPUs.
    """
    if gpu_ids is not None:
        if not isinstance(gpu_ids, (list, tuple)) or not all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpu_ids):
            raise ValueError("gpu_ids must be a list of GPU numbers (>= 0), not %r" % (gpu_ids,))
        wanted = set(gpu_ids)
    else:
        wanted = None
    failures, warnings, skipped = [], [], []
    ran_any = False
    seen = set()
    for test in parsed["tests"]:
        results = dict((g, r) for g, r in test["gpus"].items() if wanted is None or g in wanted)
        results.update(test["other_entities"])
        seen.update(g for g in results if isinstance(g, int))
        order = sorted(k for k in results if isinstance(k, int)) + sorted(k for k in results if not isinstance(k, int))
        for gpu, result in ((k, results[k]) for k in order):
            if result["status"] == "fail":
                failures.append(_entry(gpu, test, result["messages"], "failed"))
            elif result["status"] == "warn":
                warnings.append(_entry(gpu, test, result["messages"], "warning"))
            elif result["status"] == "skip":
                skipped.append(_entry(gpu, test, result["info"] or result["messages"], "skipped"))
            if result["status"] in ("pass", "warn"):
                ran_any = True
        statuses = set(r["status"] for r in list(test["gpus"].values()) + list(test["other_entities"].values()))
        if test["status"] == "fail" and "fail" not in statuses:
            failures.append(_entry(None, test, test["messages"] or test["info"], "failed"))
        elif test["status"] == "warn" and "warn" not in statuses:
            warnings.append(_entry(None, test, test["messages"] or test["info"], "warning"))
        elif test["status"] == "skip" and not results:
            skipped.append(_entry(None, test, test["info"], "did not run"))
        if test["status"] in ("pass", "warn") and not statuses:
            ran_any = True
    for gpu in sorted((wanted or set()) - seen):
        failures.append({"gpu": gpu, "test": None, "message": "GPU %d has no result in any test" % gpu})
    if not ran_any and not failures:
        failures.append({"gpu": None, "test": None, "message": "nothing ran: every test was skipped"})
    return {"passed": not failures, "failures": failures, "warnings": warnings, "skipped": skipped}
