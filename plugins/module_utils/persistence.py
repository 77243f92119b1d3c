# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU persistence mode through nvidia-persistenced or the legacy ``nvidia-smi -pm``.

Commands run through an injected ``run(argv) -> (rc, stdout, stderr)``;
parsing and planning are pure functions.
"""


import re

SMI_QUERY = ["--query-gpu=index,uuid,persistence_mode", "--format=csv,noheader"]
SYSTEMCTL_PROPERTIES = "LoadState,ActiveState,UnitFileState,ExecStart"
NO_PERSISTENCE_FLAG = "--no-persistence-mode"

# UnitFileState values meaning "starts at boot" or "cannot be enabled anyway".
UNIT_STARTS_AT_BOOT = frozenset(("enabled", "enabled-runtime", "static", "indirect", "generated", "alias"))
UNIT_RUNNING = frozenset(("active", "activating", "reloading"))

LEGACY_WARNING = (
    "method=legacy uses `nvidia-smi -pm`, the driver's deprecated persistence mode "
    "(the kernel logs \"Persistence mode is deprecated and will be removed in a future release. "
    "Please use nvidia-persistenced instead.\"); prefer method=daemon"
)
REENABLED_AT_BOOT_WARNING = (
    "%s is enabled and turns persistence back on for every GPU at the next boot; "
    "leave out `gpus` to stop and disable it"
)
NO_PERSISTENCE_WARNING = (
    "%s runs with --no-persistence-mode: persistence set now is lost at the next boot. "
    "Override ExecStart in a systemd drop-in without that flag to make it last"
)

ENABLED = "enabled"
DISABLED = "disabled"


class PersistenceError(Exception):
    """The host cannot be brought to the requested persistence state."""


def state_word(value):
    """True/False/None as enabled/disabled/None, the words used in results and diffs."""
    if value is None:
        return None
    return ENABLED if value else DISABLED


def parse_persistence_csv(text):
    """Parse ``nvidia-smi --query-gpu=index,uuid,persistence_mode --format=csv,noheader``.

    Returns ``[{"index": 0, "uuid": "GPU-...", "persistence": True|False|None}, ...]``.
    """
    gpus = []
    for line in re.split(r"\r\n|\r|\n", text or ""):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            raise ValueError("unexpected nvidia-smi --query-gpu line: %r" % line)
        mode = parts[2].lower()
        gpus.append({
            "index": int(parts[0]),
            "uuid": parts[1],
            "persistence": True if mode == "enabled" else False if mode == "disabled" else None,
        })
    return gpus


def parse_systemctl_show(text):
    """``systemctl show --property=...`` output as a dict (the first ``=`` splits)."""
    result = {}
    for line in re.split(r"\r\n|\r|\n", text or ""):
        if "=" in line:
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def service_status(properties):
    """What matters of a unit: installed, running, starts at boot, runs with --no-persistence-mode."""
    return {
        "installed": properties.get("LoadState") == "loaded",
        "active": properties.get("ActiveState") in UNIT_RUNNING,
        "enabled": properties.get("UnitFileState") in UNIT_STARTS_AT_BOOT,
        "masked": properties.get("UnitFileState", "").startswith("masked"),
        "no_persistence_mode": NO_PERSISTENCE_FLAG in properties.get("ExecStart", ""),
    }


def select_gpus(gpus, wanted):
    """The GPUs named by index or UUID (all when ``wanted`` is empty).

    Raises PersistenceError naming every entry that matches no GPU.
    """
    if not wanted:
        return list(gpus)
    selected = []
    unknown = []
    for entry in wanted:
        entry = str(entry).strip()
        match = [
            gpu for gpu in gpus
            if (entry.isdigit() and gpu["index"] == int(entry)) or gpu["uuid"].lower() == entry.lower()
        ]
        if not match:
            unknown.append(entry)
        for gpu in match:
            if gpu not in selected:
                selected.append(gpu)
    if unknown:
        raise PersistenceError(
            "no GPU with index or UUID %s; this host has %s"
            % (", ".join(unknown), ", ".join("%d (%s)" % (gpu["index"], gpu["uuid"]) for gpu in gpus))
        )
    return sorted(selected, key=lambda gpu: gpu["index"])


def plan(gpus, targets, state, method, service, whole_host):
    """Decide what to change, without changing anything.

    ``service`` is :func:`service_status` output (None for method=legacy).
    ``whole_host`` is True when no GPU list was given.  Returns the service
    actions (``enable``, ``start``, ``stop``, ``disable``), the indexes of
    the target GPUs still to switch with ``nvidia-smi -pm`` afterwards, and
    the predicted persistence per GPU index once done.
    """
    want = state == ENABLED
    predicted = dict((gpu["index"], gpu["persistence"]) for gpu in gpus)
    actions = []
    if method == "daemon":
        if want:
            if service["masked"]:
                raise PersistenceError("the nvidia-persistenced unit is masked; unmask it first")
            if not service["installed"]:
                raise PersistenceError(
                    "the nvidia-persistenced unit is not installed (it ships with the NVIDIA driver "
                    "utilities); install it or use method=legacy"
                )
            if not service["enabled"]:
                actions.append("enable")
            if not service["active"]:
                actions.append("start")
                if not service["no_persistence_mode"]:
                    # The daemon turns persistence on for every GPU when it starts.
                    predicted = dict((index, True) for index in predicted)
        elif whole_host:
            if service["active"]:
                actions.append("stop")
                # Persistence held by the daemon ends with it.
                predicted = dict((index, False) for index in predicted)
            if service["installed"] and service["enabled"] and not service["masked"]:
                actions.append("disable")
    switches = [gpu["index"] for gpu in targets if predicted[gpu["index"]] is not want]
    for index in switches:
        predicted[index] = want
    return actions, switches, predicted


class Persistence:
    """Query and change persistence on one host."""

    def __init__(self, run, smi, systemctl=None, service_name="nvidia-persistenced"):
        self.run = run
        self.smi = smi
        self.systemctl = systemctl
        self.service_name = service_name
        self.commands = []

    def _check(self, argv, what):
        rc, out, err = self.run(argv)
        if rc != 0:
            raise PersistenceError(
                "%s failed (rc=%s): %s" % (what, rc, " ".join((err or out or "").split()))
            )
        return out

    def query(self):
        """Persistence per GPU; fails clearly without driver or GPU."""
        if self.smi is None:
            raise PersistenceError("nvidia-smi not found: the NVIDIA driver is not installed")
        rc, out, err = self.run([self.smi] + SMI_QUERY)
        text = "%s\n%s" % (out or "", err or "")
        if rc == 9 or "couldn't communicate with the NVIDIA driver" in text:
            raise PersistenceError("the NVIDIA driver is not loaded (nvidia-smi rc=%s)" % rc)
        if rc == 6 or "No devices were found" in text:
            raise PersistenceError("no NVIDIA GPU found")
        if rc != 0:
            raise PersistenceError("nvidia-smi --query-gpu failed (rc=%s): %s" % (rc, " ".join(text.split())))
        try:
            gpus = parse_persistence_csv(out)
        except ValueError as exc:
            raise PersistenceError(str(exc))
        if not gpus:
            raise PersistenceError("no NVIDIA GPU found")
        return gpus

    def service(self):
        if self.systemctl is None:
            raise PersistenceError("systemctl not found: method=daemon needs systemd; use method=legacy")
        out = self._check(
            [self.systemctl, "show", self.service_name, "--property=" + SYSTEMCTL_PROPERTIES],
            "systemctl show %s" % self.service_name,
        )
        return service_status(parse_systemctl_show(out))

    def _service_action(self, action):
        argv = [self.systemctl, action, self.service_name]
        self.commands.append(" ".join(argv[1:]))
        self._check(argv, "systemctl %s %s" % (action, self.service_name))

    def _switch(self, index, want):
        argv = [self.smi, "-i", str(index), "-pm", "1" if want else "0"]
        self.commands.append("nvidia-smi -i %d -pm %s" % (index, argv[-1]))
        self._check(argv, "nvidia-smi -i %d -pm %s" % (index, argv[-1]))

    def ensure(self, state, wanted=None, method="daemon", check_mode=False):
        """Bring the target GPUs to ``state``; returns the module result (less diff)."""
        if state not in (ENABLED, DISABLED):
            raise PersistenceError("state must be enabled or disabled, got %r" % (state,))
        if method not in ("daemon", "legacy"):
            raise PersistenceError("method must be daemon or legacy, got %r" % (method,))
        warnings = []
        if method == "legacy":
            warnings.append(LEGACY_WARNING)
        gpus = self.query()
        targets = select_gpus(gpus, wanted)
        unknown = [str(gpu["index"]) for gpu in targets if gpu["persistence"] is None]
        if unknown:
            raise PersistenceError(
                "GPU %s: no persistence mode reported (N/A), it cannot be managed on this platform" % ", ".join(unknown)
            )
        service_before = self.service() if method == "daemon" else None
        if service_before and state == ENABLED and service_before["no_persistence_mode"]:
            warnings.append(NO_PERSISTENCE_WARNING % self.service_name)
        if service_before and state == DISABLED and wanted and service_before["enabled"] \
                and not service_before["no_persistence_mode"]:
            warnings.append(REENABLED_AT_BOOT_WARNING % self.service_name)
        actions, switches, predicted = plan(gpus, targets, state, method, service_before, not wanted)
        want = state == ENABLED

        if check_mode:
            self.commands = ["%s %s" % (action, self.service_name) for action in actions] + [
                "nvidia-smi -i %d -pm %s" % (index, "1" if want else "0") for index in switches
            ]
            after = predicted
            service_after = _predicted_service(service_before, actions)
        else:
            for action in actions:
                self._service_action(action)
            # Starting or stopping the daemon changed persistence: look again.
            now = self.query() if actions else gpus
            for gpu in now:
                if gpu["index"] in set(target["index"] for target in targets) and gpu["persistence"] is not want:
                    self._switch(gpu["index"], want)
            current = self.query()
            after = dict((gpu["index"], gpu["persistence"]) for gpu in current)
            wrong = [index for index in (gpu["index"] for gpu in targets) if after.get(index) is not want]
            if wrong:
                raise PersistenceError(
                    "persistence is still not %s on GPU %s after %s"
                    % (state, ", ".join(str(index) for index in wrong), "; ".join(self.commands) or "no command")
                )
            service_after = self.service() if method == "daemon" else None

        target_indexes = set(gpu["index"] for gpu in targets)
        report = [
            {
                "index": gpu["index"],
                "uuid": gpu["uuid"],
                "target": gpu["index"] in target_indexes,
                "before": state_word(gpu["persistence"]),
                "after": state_word(after.get(gpu["index"])),
            }
            for gpu in gpus
        ]
        changed = bool(self.commands)
        return {
            "changed": changed,
            "state": state,
            "method": method,
            "gpus": report,
            "service": None if service_before is None else {
                "name": self.service_name,
                "before": _service_view(service_before),
                "after": _service_view(service_after),
            },
            "commands": list(self.commands),
            "warnings": warnings,
        }


def _service_view(status):
    return {"active": status["active"], "enabled": status["enabled"]}


def _predicted_service(status, actions):
    if status is None:
        return None
    status = dict(status)
    for action in actions:
        if action in ("start", "stop"):
            status["active"] = action == "start"
        else:
            status["enabled"] = action == "enable"
    return status


def diff(result):
    """Before/after of the service and of every GPU, for ``--diff``."""
    sides = {}
    for side in ("before", "after"):
        view = {"gpus": dict(
            ("%d (%s)" % (gpu["index"], gpu["uuid"]), gpu[side]) for gpu in result["gpus"]
        )}
        if result["service"] is not None:
            service = result["service"][side]
            view["service"] = "%s: %s, %s" % (
                result["service"]["name"],
                "active" if service["active"] else "inactive",
                "enabled" if service["enabled"] else "disabled",
            )
        sides[side] = view
    return sides
