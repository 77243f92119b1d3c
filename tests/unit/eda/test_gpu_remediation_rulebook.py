# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The shipped rulebook, run by a real ansible-rulebook (issue 30 item 3).

ansible-rulebook listens with extensions/eda/rulebooks/gpu_remediation.yml on a free port; a
recorded Alertmanager webhook payload (tests/fixtures/alertmanager) is POSTed to it; the rulebook
runs playbooks/remediate.yml with remediate_check=true against a localhost inventory whose
history of gpu1 holds an earlier ECC fault on GPU 0, so the plan must be an RMA of gpu1. The
resolved alert of the same payload must run nothing, a POST without the token must be refused,
and the dry run must change nothing under the state directory. Skipped where ansible-rulebook is
not installed (scripts/setup.sh installs it: requirements/eda.txt, requirements/eda.deb).
"""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
RULEBOOK = ROOT / "extensions" / "eda" / "rulebooks" / "gpu_remediation.yml"
PAYLOAD = ROOT / "tests" / "fixtures" / "alertmanager" / "webhook_xid95_gpu1.json"
TOKEN = "test-token-5f1e2d"

pytestmark = pytest.mark.skipif(shutil.which("ansible-rulebook") is None or shutil.which("java") is None,
                                reason="ansible-rulebook or Java is not installed (scripts/setup.sh installs both)")

INVENTORY = """\
all:
  children:
    gpu_nodes:
      children:
        h200_sxm:
          hosts:
            gpu1: {}
            gpu2: {}
            gpu3: {}
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    gpucloud_profile_groups: [h200_sxm]
    remediation_scheduler: none
    remediation_state_dir: %s
"""

HISTORY = {"node": "gpu1", "state": "in", "events": [
    {"time": "2026-12-01T08:00:00Z", "gpu": "0", "fault_class": "memory", "xid": 48, "alert": "GpuXidFatal",
     "alert_time": "2026-12-01T08:00:00Z", "decision": "remediate", "repair": "gpu_reset"}]}


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(port, body, token):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request("http://127.0.0.1:%d/alertmanager" % port, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _snapshot(path):
    return sorted((str(p.relative_to(path)), p.read_bytes()) for p in path.rglob("*") if p.is_file())


def test_rulebook_runs_remediate_in_check_mode_and_plans_an_rma(tmp_path):
    state = tmp_path / "state"
    (state / "history").mkdir(parents=True)
    (state / "history" / "gpu1.json").write_text(json.dumps(HISTORY))
    before = _snapshot(state)
    (tmp_path / "inventory.yml").write_text(INVENTORY % state)
    port = _free_port()
    (tmp_path / "vars.yml").write_text(json.dumps({
        "remediation_webhook_host": "127.0.0.1", "remediation_webhook_port": port,
        "remediation_webhook_token": TOKEN, "remediate_check": True}))
    env = dict(os.environ)
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))
    env.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    env["PATH"] = os.path.dirname(shutil.which("ansible-rulebook")) + os.pathsep + env.get("PATH", "")
    log = tmp_path / "rulebook.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["ansible-rulebook", "-r", str(RULEBOOK), "-i", str(tmp_path / "inventory.yml"),
             "--vars", str(tmp_path / "vars.yml")],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "ansible-rulebook exited: %s" % log.read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the webhook never listened: %s" % log.read_text()[-3000:]
                time.sleep(0.3)
        assert _post(port, PAYLOAD.read_bytes(), None) == 401
        assert _post(port, PAYLOAD.read_bytes(), TOKEN) == 200
        deadline = time.monotonic() + 45
        text = ""
        while "PLAY RECAP" not in text:
            assert time.monotonic() < deadline, "no playbook run finished: %s" % text[-3000:]
            time.sleep(0.5)
            text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    plans = [json.loads(json.loads('"%s"' % match)) for match in
             re.findall(r'"msg": "remediation plan (\{.*\})"\s*$', text, re.MULTILINE)]
    assert len(plans) == 1, text[-4000:]  # the resolved alert of gpu2 ran nothing
    plan = plans[0]
    assert (plan["node"], plan["gpu"], plan["decision"]) == ("gpu1", "0", "rma")
    assert [step["step"] for step in plan["steps"]] == ["quarantine", "drain", "rma_bundle", "hold"]
    assert "2 hardware-class faults" in plan["reason"] and plan["fault"]["xid"] == 95
    assert re.search(r"gpu1\s*: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", text)
    assert _snapshot(state) == before
