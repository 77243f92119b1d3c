# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The containerd planner on hostile input (issue 28 items 3, 17, 18) and on a Python
without tomllib (issue 27: Ubuntu 22.04's Python 3.10 with python3-tomli)."""


import importlib.util
import sys
import tomllib
import types

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import containerd_config
from ansible_collections.gpucloud.fleet.plugins.module_utils.containerd_config import (
    plan_nvidia_runtime,
    redact_secrets,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

DEFAULT_17 = fixture_text("containerd", "default-1.7.24.toml")
CRI = 'plugins."io.containerd.grpc.v1.cri"'


# --- Item 17: wrong types are refused by name, never a traceback ----------------------------------

@pytest.mark.parametrize("text,message", [
    ("version = 2\nimports = 5\n", r"current_text: imports must be an array of file paths \(strings\), got 5"),
    ('version = 2\nimports = "/etc/containerd/conf.d/*.toml"\n', "imports must be an array of file paths"),
    ("version = 2\nimports = [5, true]\n", r"imports must be an array of file paths \(strings\), got \[5, true\]"),
    ("version = 2.0\n", "version = 2.0; only version 2"),
    ('version = "2"\n', "version = '2'; only version 2"),
    ("version = 2\nplugins = 5\n", "current_text: plugins is a integer, not a table"),
    ('version = 2\nplugins = {"io.containerd.grpc.v1.cri" = []}\n',
     r'current_text: plugins\."io\.containerd\.grpc\.v1\.cri" is a array, not a table'),
    ('version = 2\n[%s]\ncontainerd = "runc"\n' % CRI, r'\.containerd is a string, not a table'),
    ('version = 2\n[%s.containerd]\nruntimes = 5\n' % CRI, r'\.containerd\.runtimes is a integer, not a table'),
    ('version = 2\n[%s.containerd]\ndefault_runtime_name = 5\n' % CRI,
     r'\.containerd\.default_runtime_name is a integer, not a runtime\'s name'),
    ('version = 2\n[%s.containerd.runtimes]\nnvidia = 5\n' % CRI, r'\.runtimes\.nvidia is a integer, not a table'),
    ('version = 2\n[%s.containerd.runtimes.runc]\n[%s.containerd.runtimes.nvidia]\noptions = "x"\n' % (CRI, CRI),
     r'\.runtimes\.nvidia\.options is a string, not a table'),
    ('version = 2\n[%s.containerd.runtimes.runc]\noptions = 5\n' % CRI, "options of runtime runc is not a table"),
])
def test_wrong_types_are_refused_by_name(text, message):
    # With default_text too: the path that restores runc wrote into whatever 'plugins' was.
    for kwargs in ({}, {"default_text": DEFAULT_17}):
        with pytest.raises(ValueError, match=message):
            plan_nvidia_runtime(text, **kwargs)


def test_imports_as_an_array_of_paths_are_returned():
    plan = plan_nvidia_runtime(DEFAULT_17.replace("imports = []", 'imports = ["/etc/containerd/conf.d/*.toml"]'))
    assert plan["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert plan_nvidia_runtime(DEFAULT_17)["imports"] == []


@pytest.mark.parametrize("text", [
    "version = 2\nx = " + "[" * 5000 + "]" * 5000 + "\n",
    "version = 2\nx = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
    "version = 2\n[%s.containerd.runtimes.runc]\n[%s.containerd.runtimes.nvidia.%s]\n" % (
        CRI, CRI, ".".join(["a"] * 3000)),
])
def test_deep_nesting_is_refused_not_a_recursion_error(text):
    with pytest.raises(ValueError, match="too deeply"):
        plan_nvidia_runtime(text)


# --- Item 18: the planner's work grows linearly with the file --------------------------------------

class CountingList(list):
    """The scanner's statement list, counting every element handed out by iteration or slicing."""

    touched = 0

    def __iter__(self):
        for item in list.__iter__(self):
            CountingList.touched += 1
            yield item

    def __getitem__(self, index):
        result = list.__getitem__(self, index)
        if isinstance(index, slice):
            CountingList.touched += len(result)
        return result


def work(text, monkeypatch):
    """Lines run in containerd_config.py plus statements touched, for one plan of text."""
    scanner_statements = containerd_config._Scanner.statements
    monkeypatch.setattr(containerd_config._Scanner, "statements",
                        lambda self: CountingList(scanner_statements(self)))
    CountingList.touched = 0
    lines = [0]
    filename = containerd_config.__file__

    def tracer(frame, event, _arg):
        if frame.f_code.co_filename != filename:
            return None
        if event == "line":
            lines[0] += 1
        return tracer

    sys.settrace(tracer)
    try:
        plan_nvidia_runtime(text)
    finally:
        sys.settrace(None)
    return lines[0] + CountingList.touched


def nvidia_subtables(count):
    return DEFAULT_17 + '\n[%s.containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n' % CRI + "".join(
        '[%s.containerd.runtimes.nvidia.options.s%d]\n  a = 1\n' % (CRI, number) for number in range(count))


def ordinary_tables(count):
    return DEFAULT_17 + "".join('[plugins."x.y".t%d]\n  a = 1\n' % number for number in range(count))


@pytest.mark.parametrize("make", [nvidia_subtables, ordinary_tables], ids=["nvidia sub-tables", "ordinary tables"])
def test_planner_work_is_linear(make, monkeypatch):
    """Doubling the tables at most doubles the work (plus the fixed cost of the defaults).

    Before the fix: 8,000 nvidia sub-tables took 22.6 s (every nvidia table rescanned every
    statement) and 32,000 tables 8.2 s (each table copied the rest of the statement list).
    """
    small, large = work(make(400), monkeypatch), work(make(800), monkeypatch)
    base = work(make(0), monkeypatch)
    assert (large - base) <= 2.2 * (small - base), (base, small, large)


# --- Item 3: registry credentials never reach a diff ------------------------------------------------

def test_registry_secrets_are_redacted_and_nothing_else():
    text = DEFAULT_17 + (
        '\n[%s.registry.configs."registry.example.com".auth]\n'
        '  username = "robot"\n'
        '  password = "s3cr3t-pass"  # rotated monthly\n'
        "  auth = 'cm9ib3Q6czNjcjN0'\n"
        '  identitytoken = """\nmulti-line-token\n"""\n'
        '[%s.registry.configs."other.example.com"]\n'
        '  auth = {username = "u", password = "inline-secret"}\n'
        '  tls.Password = "dotted-secret"\n'
        '  RegistryToken = "tok-123"\n' % (CRI, CRI))
    redacted = redact_secrets(text)
    for secret in ("s3cr3t-pass", "cm9ib3Q6czNjcjN0", "multi-line-token", "inline-secret", "dotted-secret", "tok-123"):
        assert secret in text and secret not in redacted
    assert 'username = "robot"' in redacted and "# rotated monthly" in redacted
    assert tomllib.loads(redacted)[  # still TOML, same shape
        "plugins"]["io.containerd.grpc.v1.cri"]["registry"]["configs"]["registry.example.com"]["auth"]["password"] \
        == "(redacted)"
    assert redact_secrets(DEFAULT_17) == DEFAULT_17
    assert redact_secrets("") == ""


# --- Issue 27: Python 3.10 (no tomllib) with the tomli backport ---------------------------------------

def load_without_tomllib(monkeypatch, tomli):
    """containerd_config imported afresh where 'import tomllib' fails and tomli is TOMLI (None: absent)."""
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", tomli)
    spec = importlib.util.spec_from_file_location("containerd_config_py310", containerd_config.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tomli_is_used_where_tomllib_is_missing(monkeypatch):
    calls = []

    def loads(text):
        calls.append(len(text))
        return tomllib.loads(text)

    tomli = types.ModuleType("tomli")
    tomli.loads = loads
    tomli.TOMLDecodeError = tomllib.TOMLDecodeError
    module = load_without_tomllib(monkeypatch, tomli)
    assert module.HAS_TOMLLIB is True and module.tomllib is tomli
    plan = module.plan_nvidia_runtime(DEFAULT_17)
    assert plan["changed"] is True and calls
    with pytest.raises(ValueError, match="not valid TOML"):
        module.plan_nvidia_runtime("version = [")


def test_neither_tomllib_nor_tomli_names_the_package(monkeypatch):
    module = load_without_tomllib(monkeypatch, None)
    assert module.HAS_TOMLLIB is False
    with pytest.raises(ValueError, match="install the python3-tomli package on the node"):
        module.plan_nvidia_runtime(DEFAULT_17)
