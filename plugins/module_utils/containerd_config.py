# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Plan the edit that gives containerd an ``nvidia`` runtime in its own config file.

Pure functions over text: the current ``/etc/containerd/config.toml`` goes in, the new
text, whether it changed and a short summary come out. Nothing here touches a module or
the file system; malformed input raises ``ValueError`` naming the input. Only the Python
standard library is used (``tomllib``, Python 3.11+, or the ``tomli`` backport), because
a module runs this on the managed host.

What the edit does mirrors ``nvidia-ctk runtime configure --runtime=containerd`` of the
NVIDIA Container Toolkit v1.17.8 (github.com/NVIDIA/nvidia-container-toolkit, commit
f202b80a9b9d0db00d9b1d73c0128c8962c55f4d), the last release that edits the top-level file
in place (later releases write a drop-in instead):

- The config version picks the CRI plugin: 2 (containerd 1.x) ->
  ``io.containerd.grpc.v1.cri``, 3 (containerd 2.x) -> ``io.containerd.cri.v1.runtime``
  (pkg/config/engine/containerd/containerd.go lines 143-152). A file without ``version``
  is a version 1 config (same file, lines 133-135); we refuse those.
- The ``nvidia`` runtime is a copy of the whole table of the first low-level runtime
  found among the default runtime (unless it is ``nvidia*``), ``runc`` and ``crun``
  (pkg/config/engine/engine.go lines 50-63; pkg/config/engine/containerd/config.go lines
  35-44), so ``runtime_type``, ``SystemdCgroup`` and every other runc option carry over;
  then ``options.BinaryName`` is set to the runtime's path (config.go line 63).
  ``runtime_type`` is set to ``io.containerd.runc.v2`` when the copy has none, as the
  toolkit's main branch does (commit d34b3046758cb1a5db606b2a39519c731bbf9f56,
  pkg/config/engine/containerd/config.go lines 71-73).
- ``default_runtime_name`` is set to ``nvidia`` only when asked (config.go lines 65-67);
  otherwise it is left as it is.
- CDI: ``enable_cdi = true`` in the CRI plugin's table (config.go lines 107-112).

Where we differ, on purpose:

- The edit is textual and minimal: the ``nvidia`` tables are added (or replaced) as a
  block after the copied runtime's tables, and ``default_runtime_name`` / ``enable_cdi``
  are changed on their own line. Every other byte of the file, comments included, stays
  as it was; comments inside the ``nvidia`` tables are replaced with them. The toolkit
  re-serialises the whole file and loses every comment.
- An empty or missing file means containerd's built-in defaults. The toolkit then writes
  a file holding only the ``nvidia`` runtime; on containerd 1.6.20 and 1.7.24 that file
  leaves ``runc`` out of the effective config (measured with ``containerd config dump``,
  tests/fixtures/containerd/). We need the output of ``containerd config default`` of the
  host instead and edit that.
- For the same reason a file that has no low-level runtime table to copy (Debian's packaged
  /etc/containerd/config.toml sets only the CNI paths) is refused, unless default_text is
  given: then runc's table from ``containerd config default`` is written beside nvidia's, so
  the file names both (molecule/container_runtime: ``containerd config dump`` of 1.6.20 and
  1.7.24 shows both).
- We never write a drop-in (``conf.d``) file: on containerd 1.6/1.7 a drop-in with a CRI
  plugin table replaces the whole CRI section of the main file (measured, same folder).
- Every plan is checked: the new text must parse to exactly the old document with the
  intended keys changed, or a ``ValueError`` is raised and nothing should be written.
"""


import copy
import itertools
import json
import math
import re

try:
    import tomllib
except ImportError:  # Python < 3.11: the tomli backport has the same API
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

HAS_TOMLLIB = tomllib is not None
# The distribution package of the backport where the node's Python has no tomllib (Ubuntu
# 22.04's Python 3.10: python3-tomli 1.2.2 in jammy's universe; Debian 12 and later have 3.11).
TOMLI_PACKAGE = "python3-tomli"

NVIDIA_RUNTIME = "nvidia"
DEFAULT_RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"
DEFAULT_RUNTIME_TYPE = "io.containerd.runc.v2"
# Config version -> the CRI plugin that holds the runtimes (containerd.go lines 143-152).
CRI_PLUGINS = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
# Runtimes whose table the nvidia runtime copies, after the default runtime (engine.go 50-63).
LOW_LEVEL_RUNTIMES = ("runc", "crun")

# Keys whose values are registry credentials (containerd's registry.configs.<host>.auth).
SECRET_KEYS = frozenset(("password", "auth", "identitytoken", "registrytoken"))

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MISSING = object()
_CONTAINERD_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


class _Statement(object):
    """One line-level construct of a TOML document.

    kind is "header" (``[a.b]``, or ``[[a.b]]`` with array true), "keyval" or "other"
    (blank lines and comments). start/end are offsets in the text, end just past the
    newline. For a keyval, path is the full key path (table + dotted key) and
    value_start/value_end bound the value's text.
    """

    def __init__(self, kind, start, end, path=(), table=(), array=False,
                 value_start=None, value_end=None, indent=""):
        self.kind = kind
        self.start = start
        self.end = end
        self.path = tuple(path)
        self.table = tuple(table)
        self.array = array
        self.value_start = value_start
        self.value_end = value_end
        self.indent = indent


def _require_toml():
    if not HAS_TOMLLIB:
        raise ValueError(
            "reading containerd's config needs tomllib (Python 3.11+) or the tomli backport, and this "
            "Python has neither: install the %s package on the node (Ubuntu 22.04: universe; "
            "gpucloud.fleet.container_runtime installs it), or run the module with Python 3.11 or later"
            % TOMLI_PACKAGE)


def _loads(text, what):
    _require_toml()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError("%s is not valid TOML: %s" % (what, exc)) from exc
    except RecursionError:
        raise ValueError("%s nests arrays or inline tables too deeply to be read" % what) from None


class _Scanner(object):
    """Split valid TOML text into statements, tracking strings, arrays and inline tables.

    The text has already been parsed by tomllib; this only finds where things are.
    """

    def __init__(self, text, what):
        self.text = text
        self.what = what
        self.pos = 0

    def fail(self, message):
        line = self.text.count("\n", 0, self.pos) + 1
        raise ValueError("%s: line %d: %s" % (self.what, line, message))

    def peek(self, offset=0):
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def skip_blanks(self):
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def skip_to_eol(self):
        newline = self.text.find("\n", self.pos)
        self.pos = len(self.text) if newline < 0 else newline

    def end_line(self):
        """Skip trailing blanks and a comment, then the newline; return the new offset."""
        self.skip_blanks()
        if self.peek() == "#":
            self.skip_to_eol()
        if self.peek() == "\r":
            self.pos += 1
        if self.peek() == "\n":
            self.pos += 1
        elif self.peek():
            self.fail("unexpected %r after a value or header" % self.peek())
        return self.pos

    def skip_string(self):
        quote = self.peek()
        if self.text.startswith(quote * 3, self.pos):
            self.pos += 3
            while True:
                if not self.peek():
                    self.fail("unterminated multi-line string")
                if quote == '"' and self.peek() == "\\":
                    self.pos += 2
                    continue
                if self.text.startswith(quote * 3, self.pos):
                    self.pos += 3
                    # Up to two quotes may end the content right before the delimiter.
                    extra = 0
                    while self.peek() == quote and extra < 2:
                        self.pos += 1
                        extra += 1
                    return
                self.pos += 1
        self.pos += 1
        while True:
            char = self.peek()
            if char in ("", "\n"):
                self.fail("unterminated string")
            if quote == '"' and char == "\\":
                self.pos += 2
                continue
            self.pos += 1
            if char == quote:
                return

    def read_key(self):
        """A dotted key as a tuple of its decoded parts."""
        parts = []
        while True:
            self.skip_blanks()
            start = self.pos
            if self.peek() in ('"', "'"):
                self.skip_string()
                token = self.text[start:self.pos]
                parts.append(tomllib.loads("k = %s" % token)["k"])
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if not match:
                    self.fail("expected a key")
                self.pos = match.end()
                parts.append(match.group(0))
            self.skip_blanks()
            if self.peek() != ".":
                return tuple(parts)
            self.pos += 1

    def skip_value(self):
        """Skip a value (any nesting, any number of lines); return where its text ends."""
        depth = 0
        value_end = self.pos
        while True:
            char = self.peek()
            if char in ('"', "'"):
                self.skip_string()
                value_end = self.pos
            elif char == "#":
                if depth == 0:
                    return value_end
                self.skip_to_eol()
            elif char in ("[", "{"):
                depth += 1
                self.pos += 1
                value_end = self.pos
            elif char in ("]", "}"):
                depth -= 1
                self.pos += 1
                value_end = self.pos
            elif char in ("\n", "") and depth == 0:
                return value_end
            elif char == "":
                self.fail("unterminated array or inline table")
            else:
                self.pos += 1
                if char not in (" ", "\t", "\r", "\n"):
                    value_end = self.pos

    def statements(self):
        result = []
        table = ()
        while self.pos < len(self.text):
            start = self.pos
            self.skip_blanks()
            indent = self.text[start:self.pos]
            char = self.peek()
            if char in ("\n", "\r", "#", ""):
                self.end_line()
                result.append(_Statement("other", start, self.pos, indent=indent))
            elif char == "[":
                array = self.peek(1) == "["
                self.pos += 2 if array else 1
                table = self.read_key()
                closing = "]]" if array else "]"
                if not self.text.startswith(closing, self.pos):
                    self.fail("expected %r to close a table header" % closing)
                self.pos += len(closing)
                self.end_line()
                result.append(_Statement("header", start, self.pos, path=table, table=table,
                                         array=array, indent=indent))
            else:
                key = self.read_key()
                if self.peek() != "=":
                    self.fail("expected '=' after a key")
                self.pos += 1
                self.skip_blanks()
                value_start = self.pos
                value_end = self.skip_value()
                self.end_line()
                result.append(_Statement("keyval", start, self.pos, path=table + key, table=table,
                                         value_start=value_start, value_end=value_end,
                                         indent=indent))
        return result


def _blocks(statements):
    """(header, first statement index, end offset) of each table, without its trailing blank lines.

    One pass over the statements: a table ends at its last key before the next header.
    """
    blocks = []
    for index, statement in enumerate(statements):
        if statement.kind == "header":
            blocks.append([statement, index, statement.end])
        elif statement.kind == "keyval" and blocks:
            blocks[-1][2] = statement.end
    return [tuple(block) for block in blocks]


def _render_key(part, quote):
    if _BARE_KEY.fullmatch(part):
        return part
    return _render_string(part, quote)


def _render_string(value, quote):
    if quote == "'" and "'" not in value and not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", value):
        return "'%s'" % value
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")


def _render_value(value, quote):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _render_string(value, quote)
    if isinstance(value, list):
        return "[%s]" % ", ".join(_render_value(item, quote) for item in value)
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s = %s" % (_render_key(key, quote), _render_value(item, quote))
                                  for key, item in value.items())
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise ValueError("cannot write a TOML value of type %s" % type(value).__name__)


def _render_table(path, table, indent, quote, step="  "):
    """A table and its sub-tables as TOML text: keys before sub-tables, blank line between."""
    parts = []
    _render_table_into(parts, path, table, indent, quote, step)
    return "\n".join(parts)


def _render_table_into(parts, path, table, indent, quote, step):
    header = "[%s]" % ".".join(_render_key(part, quote) for part in path)
    lines = [indent + header]
    subtables = []
    for key, value in table.items():
        if isinstance(value, dict):
            subtables.append((key, value))
        else:
            lines.append("%s%s%s = %s" % (indent, step, _render_key(key, quote), _render_value(value, quote)))
    parts.append("\n".join(lines) + "\n")
    for key, value in subtables:
        _render_table_into(parts, path + (key,), value, indent + step, quote, step)


def _get(document, path):
    node = document
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(document, path, value):
    node = document
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


def _flatten(value, prefix=()):
    if isinstance(value, dict):
        flat = {}
        for key, item in value.items():
            flat.update(_flatten(item, prefix + (key,)))
        return flat
    return {prefix: value}


def _dotted(path):
    return ".".join(_render_key(part, '"') for part in path)


def containerd_config_version(containerd_version):
    """The config version containerd's own ``config default`` writes: 2 for 1.x, 3 for 2.x."""
    major, _minor = _parse_containerd_version(containerd_version)
    if major == 1:
        return 2
    if major == 2:
        return 3
    raise ValueError("containerd_version %r: only containerd 1.x and 2.x are known" % (containerd_version,))


def _parse_containerd_version(containerd_version):
    match = _CONTAINERD_VERSION.match(str(containerd_version or ""))
    if not match:
        raise ValueError("containerd_version %r is not a version such as 1.7.24 or 2.1.9" % (containerd_version,))
    return int(match.group(1)), int(match.group(2))


def _config_version(document, what):
    if "version" not in document:
        raise ValueError(
            "%s has no 'version' key, so containerd reads it as a version 1 config "
            "(containerd-config.toml(5)); only version 2 (containerd 1.x) and 3 (containerd 2.x) "
            "are handled: write 'containerd config default' to it and apply your changes again" % what)
    version = document["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version not in CRI_PLUGINS:
        raise ValueError("%s: version = %r; only version 2 (containerd 1.x) and 3 (containerd 2.x) "
                         "are handled" % (what, version))
    return version


def _source_runtime(runtimes, default_name, what, runtimes_path):
    candidates = []
    if default_name and not default_name.startswith("nvidia"):
        candidates.append(default_name)
    candidates.extend(name for name in LOW_LEVEL_RUNTIMES if name not in candidates)
    for name in candidates:
        if isinstance(runtimes.get(name), dict):
            return name
    raise ValueError(
        "%s has no runtime table to copy for nvidia (looked for %s under [%s]); a file that "
        "names runtimes without runc leaves runc out of containerd 1.6/1.7's effective config "
        "(measured with containerd config dump), so start from 'containerd config default'"
        % (what, ", ".join(candidates), _dotted(runtimes_path)))


def _type_name(value):
    return {dict: "table", list: "array", str: "string", bool: "boolean", int: "integer",
            float: "float"}.get(type(value), "date/time")


def _check_types(document, table_paths, containerd_path, what):
    """Refuse, by name, a key the edit relies on that has the wrong TOML type."""
    imports = document.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(item, str) for item in imports):
        raise ValueError("%s: imports must be an array of file paths (strings), got %s"
                         % (what, json.dumps(imports, default=str)))
    plugins = document.get("plugins", {})
    if not isinstance(plugins, dict):
        raise ValueError("%s: plugins is a %s, not a table" % (what, _type_name(plugins)))
    for path in table_paths:
        for depth in range(2, len(path) + 1):
            value = _get(document, path[:depth])
            if value is not None and not isinstance(value, dict):
                raise ValueError("%s: %s is a %s, not a table" % (what, _dotted(path[:depth]), _type_name(value)))
    default_name = _get(document, containerd_path + ("default_runtime_name",))
    if default_name is not None and not isinstance(default_name, str):
        raise ValueError("%s: %s is a %s, not a runtime's name" % (
            what, _dotted(containerd_path + ("default_runtime_name",)), _type_name(default_name)))


def _merge(base, override):
    """base with override's keys on top, tables merged key by key."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merged_runtime(existing, desired, runtime_path, what, runtimes_path):
    """The nvidia runtime that is there, with what it needs from the copy (see plan_nvidia_runtime)."""
    binary = existing.get("options", {}).get("BinaryName")
    if binary not in (None, "", runtime_path):
        wanted = json.dumps(runtime_path)
        raise ValueError(
            "%s: runtime %s already runs %s (%s.options.BinaryName; a GPU Operator installs its own), not %s; "
            "it is left alone: set replace_runtime (container_runtime_containerd_replace_nvidia) to replace it "
            "with a copy of runc running %s"
            % (what, NVIDIA_RUNTIME, json.dumps(binary, default=str), _dotted(runtimes_path + (NVIDIA_RUNTIME,)),
               wanted, wanted))
    merged = _merge(desired, existing)
    merged["options"]["BinaryName"] = runtime_path
    if "SystemdCgroup" in desired["options"]:
        merged["options"]["SystemdCgroup"] = desired["options"]["SystemdCgroup"]
    if not merged.get("runtime_type"):
        merged["runtime_type"] = DEFAULT_RUNTIME_TYPE
    return merged


def _desired_runtime(source_table, runtime_path, what, source_name):
    desired = copy.deepcopy(source_table)
    options = desired.setdefault("options", {})
    if not isinstance(options, dict):
        raise ValueError("%s: options of runtime %s is not a table" % (what, source_name))
    options["BinaryName"] = runtime_path
    if not desired.get("runtime_type"):
        desired["runtime_type"] = DEFAULT_RUNTIME_TYPE
    return desired


class _Edit(object):
    """Replace text[start:end] with text; edits at the same offset go in rank order."""

    def __init__(self, start, end, text, rank=0):
        self.start = start
        self.end = end
        self.text = text
        self.rank = rank


def _apply(text, edits):
    result = []
    position = 0
    for edit in sorted(edits, key=lambda item: (item.start, item.rank, item.end)):
        if edit.start < position:
            raise ValueError("overlapping edits (a bug in containerd_config)")
        result.append(text[position:edit.start])
        result.append(edit.text)
        position = edit.end
    result.append(text[position:])
    return "".join(result)


def _set_key_edits(text, statements, blocks, table_path, key, value, quote, what):
    """Edits that make table_path.key = value: replace the value in place, or add a line."""
    full = table_path + (key,)
    for statement in statements:
        if statement.kind == "keyval" and statement.path == full:
            old = text[statement.value_start:statement.value_end]
            style = "'" if old.startswith("'") else '"'
            return [_Edit(statement.value_start, statement.value_end, _render_value(value, style))]
        if statement.kind == "keyval" and full[:len(statement.path)] == statement.path:
            raise ValueError("%s: %s is set as an inline table; edit it by hand"
                             % (what, _dotted(statement.path)))
    for header, index, _end in blocks:
        if header.path == table_path and not header.array:
            indent = header.indent + "  "
            for following in itertools.islice(statements, index + 1, None):
                if following.kind == "header":
                    break
                if following.kind == "keyval":
                    indent = following.indent
                    break
            line = "%s%s = %s\n" % (indent, _render_key(key, quote), _render_value(value, quote))
            return [_Edit(header.end, header.end, line)]
    # The table exists only implicitly (through its sub-tables): give it a header before them.
    for header, _index, _end in blocks:
        if header.path[:len(table_path)] == table_path:
            rendered = _render_table(table_path, {key: value}, header.indent, quote)
            return [_Edit(header.start, header.start, rendered + "\n", rank=len(table_path))]
    rendered = _render_table(table_path, {key: value}, "", quote)
    prefix = "" if not text or text.endswith("\n") else "\n"
    return [_Edit(len(text), len(text), prefix + "\n" + rendered, rank=len(table_path))]


def plan_nvidia_runtime(current_text, set_as_default=False, runtime_path=DEFAULT_RUNTIME_PATH,
                        enable_cdi=False, default_text=None, containerd_version=None, replace_runtime=False):
    """Plan the edit of containerd's config file that adds the ``nvidia`` runtime.

    See _plan_nvidia_runtime for the arguments and the result. Input nested so deeply that
    Python's recursion limit is reached is refused with a ValueError, as any other bad input.
    """
    try:
        return _plan_nvidia_runtime(current_text, set_as_default, runtime_path, enable_cdi, default_text,
                                    containerd_version, replace_runtime)
    except RecursionError:
        raise ValueError("current_text nests tables, arrays or inline tables too deeply to be handled") from None


def _plan_nvidia_runtime(current_text, set_as_default, runtime_path, enable_cdi, default_text,
                         containerd_version, replace_runtime):
    """Plan the edit of containerd's config file that adds the ``nvidia`` runtime.

    current_text: the file's text; None or blank (whitespace and comments only) means
    the file is missing or empty, i.e. containerd runs on its built-in defaults.
    set_as_default: make ``nvidia`` the CRI ``default_runtime_name``; false leaves the
    default as it is, whatever it is.
    runtime_path: the ``nvidia-container-runtime`` binary (``options.BinaryName``).
    enable_cdi: set ``enable_cdi = true`` for the CRI plugin; false leaves it as it is.
    default_text: the host's ``containerd config default`` output, needed when current_text
    is blank (it becomes the base the runtime is added to) or names no runtime to copy (its
    default runtime's table is added beside nvidia's).
    containerd_version: the host's containerd version (``1.7.24``), optional; when given,
    a version 3 file on containerd 1.x and CDI on containerd 1.6 are refused.
    replace_runtime: an ``nvidia`` runtime that is already there keeps its own settings
    (``privileged_without_host_devices``, ``pod_annotations``, ...), runc's fill what it
    lacks, runc's ``options.SystemdCgroup`` (the node's cgroup driver) and our
    ``options.BinaryName`` are set. One that runs another binary (a GPU Operator's
    ``BinaryName``) is refused by name unless replace_runtime is true; then the whole table
    is replaced with the copy of runc, as nvidia-ctk does.

    Returns a dict: text (the new file), changed, summary (list of short lines),
    config_version, cri_plugin, source_runtime (the runtime copied), imports (files the
    config imports: a CRI table in one of them would override this file on containerd 1.x).
    """
    if not isinstance(set_as_default, bool):
        raise ValueError("set_as_default must be true or false, got %r" % (set_as_default,))
    if not isinstance(enable_cdi, bool):
        raise ValueError("enable_cdi must be true or false, got %r" % (enable_cdi,))
    if not isinstance(replace_runtime, bool):
        raise ValueError("replace_runtime must be true or false, got %r" % (replace_runtime,))
    if not isinstance(runtime_path, str) or not runtime_path.startswith("/") or "\n" in runtime_path:
        raise ValueError("runtime_path must be an absolute path, got %r" % (runtime_path,))
    if current_text is not None and not isinstance(current_text, str):
        raise ValueError("current_text must be the config file's text, got %s" % type(current_text).__name__)
    what = "current_text"
    original = current_text or ""
    summary = []
    document = _loads(original, what)
    if not document:
        if not default_text:
            raise ValueError(
                "current_text is empty (containerd's built-in defaults) and default_text is not given: "
                "a file holding only the nvidia runtime would leave runc out of containerd 1.6/1.7's "
                "effective config; pass the host's 'containerd config default' output as default_text")
        what = "default_text"
        base = default_text if not original.strip() else original.rstrip("\n") + "\n\n" + default_text
        document = _loads(base, what)
        summary.append("the file was empty: wrote containerd's defaults ('containerd config default') as the base")
    else:
        base = original
    version = _config_version(document, what)
    if containerd_version is not None:
        major, minor = _parse_containerd_version(containerd_version)
        if version == 3 and major < 2:
            raise ValueError("%s is a version 3 config, which containerd %s cannot read (2.0 or later)"
                             % (what, containerd_version))
        if enable_cdi and (major, minor) < (1, 7):
            raise ValueError("enable_cdi: containerd %s has no CDI support in its CRI plugin "
                             "(enable_cdi came with containerd 1.7)" % containerd_version)
    cri = CRI_PLUGINS[version]
    cri_path = ("plugins", cri)
    containerd_path = cri_path + ("containerd",)
    runtimes_path = containerd_path + ("runtimes",)
    nvidia_path = runtimes_path + (NVIDIA_RUNTIME,)

    _check_types(document, (cri_path, containerd_path, runtimes_path, nvidia_path, nvidia_path + ("options",)),
                 containerd_path, what)
    runtimes = _get(document, runtimes_path)
    if not isinstance(runtimes, dict):
        runtimes = {}
    default_name = _get(document, containerd_path + ("default_runtime_name",))
    restored = None
    try:
        source = _source_runtime(runtimes, default_name if isinstance(default_name, str) else "", what,
                                 runtimes_path)
    except ValueError:
        if not default_text or what == "default_text":
            raise
        # A file that sets CRI options but names no runtime (Debian's packaged
        # /etc/containerd/config.toml sets only the CNI paths) runs runc from the built-in
        # defaults; naming nvidia alone would replace them. Write the default runtime's
        # table from 'containerd config default' beside nvidia, so runc stays.
        defaults = _loads(default_text, "default_text")
        if _config_version(defaults, "default_text") != version:
            raise ValueError("default_text is a version %s config but %s is version %s"
                             % (defaults.get("version"), what, version)) from None
        default_runtimes = _get(defaults, runtimes_path)
        default_default = _get(defaults, containerd_path + ("default_runtime_name",))
        source = _source_runtime(default_runtimes if isinstance(default_runtimes, dict) else {},
                                 default_default if isinstance(default_default, str) else "",
                                 "default_text", runtimes_path)
        restored = copy.deepcopy(default_runtimes[source])
        runtimes = dict(runtimes)
        runtimes[source] = restored
    existing = runtimes.get(NVIDIA_RUNTIME)
    desired = _desired_runtime(runtimes[source], runtime_path, what, source)
    if existing is not None and not replace_runtime:
        desired = _merged_runtime(existing, desired, runtime_path, what, runtimes_path)

    statements = _Scanner(base, what).statements()
    blocks = _blocks(statements)
    quote = "'" if re.search(r"^\s*\[\s*plugins\s*\.\s*'", base, re.M) else '"'
    edits = []
    expected = copy.deepcopy(document)

    restore_path = runtimes_path + (source,)

    def restore_text(indent):
        return "" if restored is None else _render_table(restore_path, restored, indent, quote) + "\n"

    if restored is not None:
        _set(expected, restore_path, restored)
        summary.append("added runtime %s from containerd's defaults ('containerd config default'): the file "
                       "named no runtime, and naming only %s would drop %s on containerd 1.6/1.7"
                       % (source, NVIDIA_RUNTIME, source))
        if existing == desired:
            nvidia_starts = [header.start for header, _index, _end in blocks
                             if header.path[:len(nvidia_path)] == nvidia_path]
            position = min(nvidia_starts) if nvidia_starts else len(base)
            edits.append(_Edit(position, position, restore_text("")))
    if existing != desired:
        nvidia_blocks = [(header, end) for header, _index, end in blocks
                         if header.path[:len(nvidia_path)] == nvidia_path]
        # Neighbouring nvidia tables (only blank lines or comments between them) go as one:
        # a table is a neighbour of the previous one when no other table comes between.
        spans = []
        previous_nvidia = False
        for header, _index, end in blocks:
            inside = header.path[:len(nvidia_path)] == nvidia_path
            if inside and previous_nvidia:
                spans[-1][1] = end
            elif inside:
                spans.append([header.start, end])
            previous_nvidia = inside
        for statement in statements:
            inside = statement.path[:len(nvidia_path)] == nvidia_path
            if statement.kind == "keyval" and statement.path == nvidia_path:
                raise ValueError("%s: runtime %s is an inline table; edit it by hand or write it as "
                                 "[%s] tables" % (what, NVIDIA_RUNTIME, _dotted(nvidia_path)))
            if statement.kind == "keyval" and inside and statement.table[:len(nvidia_path)] != nvidia_path:
                raise ValueError("%s: runtime %s is written with dotted keys (%s); edit it by hand or "
                                 "write it as [%s] tables" % (what, NVIDIA_RUNTIME, _dotted(statement.path),
                                                              _dotted(nvidia_path)))
            if statement.kind == "header" and inside and statement.array:
                raise ValueError("%s: [[%s]] is an array of tables" % (what, _dotted(statement.path)))
        source_path = runtimes_path + (source,)
        source_blocks = [(header, end) for header, _index, end in blocks
                         if header.path[:len(source_path)] == source_path]
        if nvidia_blocks:
            indent = nvidia_blocks[0][0].indent
            rendered = _render_table(nvidia_path, desired, indent, quote)
            for number, (start, end) in enumerate(spans):
                edits.append(_Edit(start, end, restore_text(indent) + rendered if number == 0 else ""))
            before, after = _flatten(existing or {}), _flatten(desired)
            changed_keys = sorted(_dotted(key) for key in set(before) | set(after)
                                  if before.get(key, _MISSING) != after.get(key, _MISSING))
            if replace_runtime:
                summary.append("replaced runtime %s (a copy of %s with options.BinaryName = %s); changed: %s"
                               % (NVIDIA_RUNTIME, source, json.dumps(runtime_path), ", ".join(changed_keys)))
            else:
                summary.append("updated runtime %s (its own settings kept; %s's fill the gaps, %s's "
                               "options.SystemdCgroup, options.BinaryName = %s); changed: %s"
                               % (NVIDIA_RUNTIME, source, source, json.dumps(runtime_path), ", ".join(changed_keys)))
        else:
            anchors = source_blocks or [(header, end) for header, _index, end in blocks
                                        if header.path[:len(runtimes_path)] == runtimes_path]
            if anchors:
                indent = anchors[0][0].indent if source_blocks else anchors[0][0].indent + "  "
                position = max(end for _header, end in anchors)
            else:
                indent = ""
                position = len(base)
            rendered = _render_table(nvidia_path, desired, indent, quote)
            prefix = "" if position == 0 or base[position - 1] == "\n" else "\n"
            edits.append(_Edit(position, position, prefix + "\n" + restore_text(indent) + rendered))
            summary.append("added runtime %s (a copy of %s with options.BinaryName = %s)"
                           % (NVIDIA_RUNTIME, source, json.dumps(runtime_path)))
        _set(expected, nvidia_path, desired)

    if set_as_default and default_name != NVIDIA_RUNTIME:
        edits.extend(_set_key_edits(base, statements, blocks, containerd_path, "default_runtime_name",
                                    NVIDIA_RUNTIME, quote, what))
        _set(expected, containerd_path + ("default_runtime_name",), NVIDIA_RUNTIME)
        summary.append("default_runtime_name: %s -> %s"
                       % (json.dumps(default_name) if default_name is not None else "(unset)",
                          json.dumps(NVIDIA_RUNTIME)))

    if enable_cdi:
        current_cdi = _get(document, cri_path + ("enable_cdi",))
        if current_cdi is not True:
            edits.extend(_set_key_edits(base, statements, blocks, cri_path, "enable_cdi", True, quote, what))
            _set(expected, cri_path + ("enable_cdi",), True)
            was = "(unset)" if current_cdi is None else json.dumps(current_cdi)
            summary.append("enable_cdi: %s -> true" % was)

    text = _apply(base, edits)
    try:
        result = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError("%s: the planned edit does not parse (%s); the file must be edited by hand"
                         % (what, exc)) from exc
    if result != expected:
        raise ValueError("%s: the planned edit would change more than the nvidia runtime, "
                         "default_runtime_name and enable_cdi; the file must be edited by hand" % what)
    imports = document.get("imports", [])
    return {
        "text": text,
        "changed": text != original,
        "summary": summary,
        "config_version": version,
        "cri_plugin": cri,
        "source_runtime": source,
        "imports": list(imports),
    }


def redact_secrets(text, what="the file"):
    """text with the value of every credential key replaced by "(redacted)", for a diff.

    containerd keeps registry credentials in its config (``registry.configs.<host>.auth``:
    ``password``, ``auth``, ``identitytoken``, and ``registrytoken`` in the CRI plugin's
    config). A key with one of those names (any case, any table, dotted or not) loses its
    value, and so does an array or inline table holding one. Comments and every other byte
    stay. Raises ValueError when text is not valid TOML.
    """
    if not text:
        return text
    _loads(text, what)
    edits = []
    for statement in _Scanner(text, what).statements():
        if statement.kind != "keyval":
            continue
        value_text = text[statement.value_start:statement.value_end]
        secret = statement.path[-1].lower() in SECRET_KEYS
        if not secret and value_text[:1] in ("[", "{"):
            secret = _holds_secret(tomllib.loads("v = " + value_text)["v"])
        if secret:
            edits.append(_Edit(statement.value_start, statement.value_end, '"(redacted)"'))
    return _apply(text, edits)


def _holds_secret(value):
    if isinstance(value, dict):
        return any(key.lower() in SECRET_KEYS or _holds_secret(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_secret(item) for item in value)
    return False


def cri_tables_in_imports(imported, cri_plugin):
    """The imported files that hold a table of the CRI plugin, as {path: [dotted tables]}.

    imported: {path: text} of every file the main config's ``imports`` resolve to. On
    containerd 1.6/1.7 such a file replaces the main file's whole CRI section (measured,
    tests/fixtures/containerd/measured.source): the nvidia runtime written to the main file
    would be lost, and runc with it.
    """
    found = {}
    for path in sorted(imported):
        document = _loads(imported[path], path)
        plugins = document.get("plugins")
        if isinstance(plugins, dict) and cri_plugin in plugins:
            table = plugins[cri_plugin]
            keys = sorted(table) if isinstance(table, dict) else []
            found[path] = ["plugins.%s%s" % (json.dumps(cri_plugin), ("." + key) if key else "")
                           for key in (keys or [""])]
    return found
