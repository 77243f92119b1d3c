#!/usr/bin/env bash
# The whole test suite, in order, stopping at the first failure:
#   setup -> yamllint -> ansible-lint (production profile) -> ansible-test sanity
#   -> pytest unit tests -> every Molecule scenario under molecule/ -> collection build
# Prints the wall time of each stage and ends with a one-line summary.
# Usage: scripts/test.sh [stage ...]   (stages: setup lint sanity units molecule build;
#        default: all). MOLECULE_SCENARIOS="lab firewall" limits the Molecule stage.
# The metal lane (molecule/metal: a QEMU VM) joins the run by itself where a VM gets KVM
# (GPUCLOUD_METAL_LANE unset or auto; scripts/lab_vm.py accel decides, booting nothing): it
# starts as soon as setup is done, beside lint, sanity, the unit tests and the container
# scenarios, and the molecule stage waits for it and fails when it failed. Where only TCG
# is left (this repository's 2-core CI machine kind: its /dev/kvm is PVM), the lane takes
# 50-70 minutes of one core and is left out, with the reason in the summary.
# GPUCLOUD_METAL_LANE=background or serial runs it anyway (docs/metal-lane.md); 0 leaves it
# out unless MOLECULE_SCENARIOS names it.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GPUCLOUD_ROOT"

ALL_STAGES=(setup lint sanity units molecule build)
stages=("$@")
((${#stages[@]})) || stages=("${ALL_STAGES[@]}")
for s in "${stages[@]}"; do
  [[ " ${ALL_STAGES[*]} " == *" $s "* ]] || { echo "test.sh: unknown stage '$s' (allowed: ${ALL_STAGES[*]})" >&2; exit 2; }
done

declare -a report=()
summary_counts=""
stages_passed=0
passed=0   # unit tests + testinfra checks, for the closing "N passed, N failed" line
START=$SECONDS

finish() {
  local rc=$?
  stop_beside_lane
  stop_metal_lane
  echo
  echo "== stage timings =="
  for line in "${report[@]}"; do echo "  $line"; done
  echo "  total: $((SECONDS - START)) s"
  if ((rc == 0)); then
    echo "gpucloud.fleet tests: $stages_passed stages passed${summary_counts} in $((SECONDS - START)) s"
    echo "total: $passed passed, 0 failed"
  else
    echo "gpucloud.fleet tests: FAILED in stage '${current:-?}' after $((SECONDS - START)) s${summary_counts}"
    echo "total: $passed passed, 1 failed"
  fi
}
trap finish EXIT

run_stage() {
  current=$1; shift
  local t0=$SECONDS
  echo
  echo "== stage: $current =="
  "$@"
  report+=("$current: $((SECONDS - t0)) s")
  stages_passed=$((stages_passed + 1))
}

stage_setup() { scripts/setup.sh; }

stage_lint() {
  yamllint --strict .
  # docs/roles/<role>.md is generated from the argument specs: a stale page fails here.
  python scripts/role_docs.py --check
  ansible-lint --profile production --offline
}

stage_sanity() {
  # ansible-test needs the collection at ansible_collections/<ns>/<name>; copy the
  # files git knows (tracked and new, not ignored) there.
  local dest="$GPUCLOUD_ROOT/build/sanity/ansible_collections/gpucloud/fleet"
  rm -rf "$dest"
  mkdir -p "$dest"
  git ls-files -z --cached --others --exclude-standard |
    rsync -a --from0 --files-from=- ./ "$dest/"
  # The copy lies inside this checkout, whose .gitignore hides it from ansible-test's
  # file listing: make it a repository of its own.
  (cd "$dest" && git init -q && git add -A &&
    ansible-test sanity --venv --python 3.11 --color no)
}

# Two pytest processes side by side, one per core: about twenty tests run ansible-playbook
# (the roles' check-mode and validation cases) and take most of the time; the monitoring
# ones go to one half, everything else to the other (measured 2026-12-02: monitoring and
# k8s together took 319 s against 240 s for the rest).
UNIT_HALVES=("tests/unit/monitoring" "tests/unit --ignore=tests/unit/monitoring")

stage_units() {
  local rc=0 i n total=0 pids=() outs=()
  for i in "${!UNIT_HALVES[@]}"; do
    outs[i]=$(mktemp)
    # shellcheck disable=SC2086  # each half is a list of pytest arguments
    python -m pytest -q -p no:cacheprovider ${UNIT_HALVES[i]} >"${outs[i]}" 2>&1 &
    pids[i]=$!
  done
  for i in "${!UNIT_HALVES[@]}"; do
    wait "${pids[i]}" || rc=1
    echo "-- pytest ${UNIT_HALVES[i]}"
    cat "${outs[i]}"
    n=$(grep -Eo '[0-9]+ passed' "${outs[i]}" | tail -1 | cut -d' ' -f1)
    total=$((total + ${n:-0}))
    rm -f "${outs[i]}"
  done
  passed=$((passed + total))
  summary_counts+=", units: $total passed"
  return "$rc"
}

# ---- the metal lane, in the background ------------------------------------------------
METAL_LANE=${GPUCLOUD_METAL_LANE:-auto}
metal_skip_reason="GPUCLOUD_METAL_LANE=0"
# MOLECULE_SCENARIOS naming metal asks for it too.
if [[ "$METAL_LANE" != background && " ${MOLECULE_SCENARIOS:-} " == *" metal "* ]]; then METAL_LANE=serial; fi
if [[ "$METAL_LANE" == auto ]]; then
  metal_accel=$(python3 scripts/lab_vm.py accel 2>/dev/null || echo "tcg (the KVM check failed)")
  case "$metal_accel" in
    kvm* | probe*) METAL_LANE=background ;;
    *)
      METAL_LANE=0
      metal_skip_reason="no KVM here: ${metal_accel#* }; under TCG the lane takes 50-70 minutes of one core, so it runs only when asked (GPUCLOUD_METAL_LANE=background or serial; docs/metal-lane.md)"
      ;;
  esac
fi
metal_pid=""
metal_log="$GPUCLOUD_ROOT/build/molecule-metal.log"
metal_t0=0

metal_lane_wanted() {
  [[ -f molecule/metal/molecule.yml && "$METAL_LANE" != 0 ]] || return 1
  if [[ -n "${MOLECULE_SCENARIOS:-}" ]]; then
    [[ " $MOLECULE_SCENARIOS " == *" metal "* ]]
  fi
}

start_metal_lane() {
  [[ "$METAL_LANE" == background && -z "$metal_pid" ]] || return 0
  [[ " ${stages[*]} " == *" molecule "* ]] && metal_lane_wanted || return 0
  mkdir -p "$(dirname "$metal_log")"
  echo "== metal lane: molecule test -s metal started in the background (log: $metal_log)"
  metal_t0=$SECONDS
  # Its own process group (setsid), so that an abort can stop all of it; nice, so that the
  # container scenarios' timers (the firewall's 30 s commit-confirm) keep their CPU.
  MOLECULE_GLOB='molecule/*/molecule.yml' setsid nice -n 10 molecule test -s metal >"$metal_log" 2>&1 &
  metal_pid=$!
}

stop_metal_lane() {
  [[ -n "$metal_pid" ]] && kill -0 "$metal_pid" 2>/dev/null || return 0
  echo "== metal lane: stopping it (the suite ended first) and removing its VM"
  kill -TERM -- "-$metal_pid" 2>/dev/null || true
  wait "$metal_pid" 2>/dev/null || true
  export MOLECULE_GLOB='molecule/*/molecule.yml'
  molecule cleanup -s metal >/dev/null 2>&1 || true
  molecule destroy -s metal >/dev/null 2>&1 || true
  metal_pid=""
}

# ---- the second lane: scenarios that mostly wait, beside the others ---------------------
# A few scenarios spend most of their wall time waiting on timers: Prometheus to fire and
# resolve alerts, Alertmanager's group_wait, the rulebook's playbook runs, a health sweep's
# 60 s timer. Measured on this 2-core machine kind (2026-12-07, one scenario at a time, the
# share of both cores in use every 10 s): monitoring 39 %, remediation 60 %, against 66-88 %
# for the scenarios that install and configure. Those run one after another in a second lane
# (a nested `scripts/test.sh molecule` of its own process group, output in its log, printed
# when it ends) beside the first. Each scenario still runs alone in its own lab fleet, with
# its own names and networks; nothing in them is shared but the CPU.
# GPUCLOUD_MOLECULE_BESIDE="a b" chooses them, "" runs every scenario in one lane.
MOLECULE_BESIDE=${GPUCLOUD_MOLECULE_BESIDE-monitoring remediation slurm}
beside=()
beside_pid=""
beside_log="$GPUCLOUD_ROOT/build/molecule-beside.log"
beside_t0=0

start_beside_lane() {
  ((${#beside[@]})) || return 0
  mkdir -p "$(dirname "$beside_log")"
  echo "== second lane: ${beside[*]} beside the others (log: $beside_log)"
  beside_t0=$SECONDS
  MOLECULE_SCENARIOS="${beside[*]}" GPUCLOUD_MOLECULE_BESIDE="" GPUCLOUD_METAL_LANE=0 \
    setsid "$GPUCLOUD_ROOT/scripts/test.sh" molecule >"$beside_log" 2>&1 &
  beside_pid=$!
}

# Reaps the second lane once it has ended; beside_rc is its exit status (empty: running).
beside_rc=""
reap_beside_lane() {
  [[ -n "$beside_pid" && -z "$beside_rc" ]] || return 0
  if [[ ${1:-} == wait ]] || ! kill -0 "$beside_pid" 2>/dev/null; then
    local rc=0
    wait "$beside_pid" || rc=$?
    beside_rc=$rc
  fi
}

# True (and the log printed) when the second lane has ended with a failure.
beside_lane_failed() {
  reap_beside_lane
  [[ -n "$beside_rc" && "$beside_rc" != 0 ]] || return 1
  cat "$beside_log"
  echo "molecule: the second lane (${beside[*]}) failed (exit $beside_rc); log above and in $beside_log"
  current="molecule (second lane)"
  beside_pid=""
}

beside_checks=0
finish_beside_lane() {
  [[ -n "$beside_pid" ]] || return 0
  echo "-- molecule: waiting for the second lane (${beside[*]}; $((SECONDS - beside_t0)) s so far)"
  reap_beside_lane wait
  beside_pid=""
  cat "$beside_log"
  ((beside_rc == 0)) || { echo "molecule: the second lane (${beside[*]}) failed (exit $beside_rc); log above and in $beside_log"; return 1; }
  local line
  while IFS= read -r line; do report+=("${line#  }, second lane"); done < <(grep -E '^    molecule [a-z_0-9]+: [0-9]+ s' "$beside_log")
  beside_checks=$(grep -Eo '^total: [0-9]+ passed' "$beside_log" | grep -Eo '[0-9]+' || echo 0)
}

stop_beside_lane() {
  [[ -n "$beside_pid" && -z "$beside_rc" ]] && kill -0 "$beside_pid" 2>/dev/null || return 0
  echo "== second lane: stopping it (the suite ended first) and removing its nodes"
  kill -TERM -- "-$beside_pid" 2>/dev/null || true
  wait "$beside_pid" 2>/dev/null || true
  beside_pid=""
  export MOLECULE_GLOB='molecule/*/molecule.yml'
  local s
  for s in "${beside[@]}"; do molecule destroy -s "$s" >/dev/null 2>&1 || true; done
}

# Leaves nothing behind: no lab node or network of the scenario.
check_scenario_gone() {
  if [[ -n "$(scripts/lab.py list "molecule-$1")" ]] ||
     [[ -n "$(podman network ls --filter "label=gpucloud.fleet=molecule-$1" --format '{{.Name}}')" ]]; then
    echo "scenario $1 left lab nodes or networks behind:"; scripts/lab.py list "molecule-$1"; return 1
  fi
}

stage_molecule() {
  export MOLECULE_GLOB='molecule/*/molecule.yml'
  local scenarios n=0 t0 log checks=0 c
  if [[ -n "${MOLECULE_SCENARIOS:-}" ]]; then
    read -r -a scenarios <<<"$MOLECULE_SCENARIOS"
  else
    scenarios=()
    for f in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$f")")"); done
  fi
  local serial=() ubuntu_ran=() ubuntu_left=()
  beside=()
  for s in "${scenarios[@]}"; do
    # A scenario with Ubuntu nodes needs the Ubuntu images; GPUCLOUD_UBUNTU=0 leaves them
    # out on purpose (scripts/build-images.sh), and the summary says so.
    if grep -Eq '^[[:space:]]*image:[[:space:]]*ubuntu' "molecule/$s/molecule.yml"; then
      if [[ ${GPUCLOUD_UBUNTU:-1} == 0 ]]; then
        report+=("  molecule $s: not run (it has Ubuntu nodes; GPUCLOUD_UBUNTU=0)")
        ubuntu_left+=("$s")
        continue
      fi
      ubuntu_ran+=("$s")
    fi
    if [[ "$s" == metal ]]; then
      if [[ "$METAL_LANE" == 0 ]]; then
        report+=("  molecule metal: not run ($metal_skip_reason)")
        continue
      fi
      [[ "$METAL_LANE" == background ]] && { start_metal_lane; continue; }
    fi
    if [[ " $MOLECULE_BESIDE " == *" $s "* ]]; then beside+=("$s"); else serial+=("$s"); fi
  done
  # Nothing to run beside: the second lane's scenarios run in this one.
  if ((${#serial[@]} == 0)); then serial=("${beside[@]}"); beside=(); fi
  start_beside_lane
  for s in "${serial[@]}"; do
    beside_lane_failed && return 1
    t0=$SECONDS
    echo "-- molecule scenario: $s"
    log=$(mktemp)
    molecule test -s "$s" 2>&1 | tee "$log"
    # testinfra's pytest summary lines ("== 12 passed in 3.4s ==")
    # (a scenario verified by Ansible asserts prints none: grep finds nothing, which is fine)
    c=$({ grep -E '^=+ .*[0-9]+ passed.* in [0-9.]+s' "$log" || true; } | { grep -Eo '[0-9]+ passed' || true; } |
      awk '{t+=$1} END {print t+0}')
    rm -f "$log"
    checks=$((checks + c))
    check_scenario_gone "$s"
    report+=("  molecule $s: $((SECONDS - t0)) s, $c testinfra checks")
    n=$((n + 1))
  done
  finish_beside_lane || return 1
  checks=$((checks + beside_checks))
  n=$((n + ${#beside[@]}))
  if [[ -n "$metal_pid" ]]; then
    echo "-- molecule scenario: metal (background since $((SECONDS - metal_t0)) s; waiting for it)"
    local metal_rc=0
    wait "$metal_pid" || metal_rc=$?
    metal_pid=""
    cat "$metal_log"
    report+=("  molecule metal: $((SECONDS - metal_t0)) s in the background, exit $metal_rc")
    ((metal_rc == 0)) || { echo "molecule metal failed (exit $metal_rc); log above and in $metal_log"; return 1; }
    check_scenario_gone metal
    n=$((n + 1))
  fi
  passed=$((passed + checks))
  summary_counts+=", molecule: $n scenarios / $checks testinfra checks passed"
  if ((${#ubuntu_left[@]})); then
    summary_counts+=", Ubuntu: not run (GPUCLOUD_UBUNTU=0; left out: ${ubuntu_left[*]})"
  elif ((${#ubuntu_ran[@]})); then
    summary_counts+=", Ubuntu nodes in: ${ubuntu_ran[*]}"
  else
    summary_counts+=", Ubuntu: not run (no scenario chosen has Ubuntu nodes)"
  fi
}

stage_build() {
  local out="$GPUCLOUD_ROOT/build/dist" inst="$GPUCLOUD_ROOT/build/install"
  rm -rf "$out" "$inst"
  ansible-galaxy collection build --force --output-path "$out" .
  ansible-galaxy collection install --force --offline --no-deps -p "$inst" "$out"/gpucloud-fleet-*.tar.gz
  ANSIBLE_COLLECTIONS_PATH="$inst" ansible-doc -l gpucloud.fleet | tee /dev/stderr | grep -q gpucloud.fleet
}

# ansible-test sanity and the linters each keep one core busy: with both asked for, sanity
# starts beside lint and its stage waits for it (measured 2026-12-07: lint 91 s, sanity 82 s).
sanity_pid=""
sanity_log="$GPUCLOUD_ROOT/build/sanity.log"
sanity_t0=0
start_sanity_beside() {
  [[ " ${stages[*]} " == *" lint "* && " ${stages[*]} " == *" sanity "* ]] || return 0
  mkdir -p "$(dirname "$sanity_log")"
  echo "== sanity: started beside lint (log: $sanity_log)"
  sanity_t0=$SECONDS
  stage_sanity >"$sanity_log" 2>&1 &
  sanity_pid=$!
}
stage_sanity_beside() {
  local rc=0
  wait "$sanity_pid" || rc=$?
  sanity_pid=""
  cat "$sanity_log"
  return "$rc"
}

for s in "${stages[@]}"; do
  if [[ "$s" == lint ]]; then start_sanity_beside; fi
  if [[ "$s" == sanity && -n "$sanity_pid" ]]; then
    run_stage sanity stage_sanity_beside
    report[-1]="sanity: $((SECONDS - sanity_t0)) s from its start, beside lint"
    continue
  fi
  run_stage "$s" "stage_$s"
  # Setup has made the VM image and the venv: the metal lane can start beside the rest.
  if [[ "$s" == setup ]]; then start_metal_lane; fi
done
current=""
