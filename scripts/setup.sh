#!/usr/bin/env bash
# One idempotent setup step behind both README commands (make lab-up / make test).
#   1. Debian packages the lab and the tests need (only when root and missing)
#   2. the project virtualenv from requirements/*.txt (re-installed when they change)
#   3. the collection symlink Ansible and pytest import it through
#   4. ansible-test's get-pip bootstrap, served from PyPI instead of Ansible's CI server
#   5. the local base images, built with debootstrap only when missing or outdated
# It never edits system-wide container configuration: scripts/containers.conf is used
# through CONTAINERS_CONF (scripts/env.sh).
# Usage: scripts/setup.sh [--no-images]
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GPUCLOUD_ROOT"

WANT_IMAGES=1
for arg in "$@"; do
  case "$arg" in
    --no-images) WANT_IMAGES=0 ;;
    *) echo "setup.sh: unknown argument '$arg' (allowed: --no-images)" >&2; exit 2 ;;
  esac
done

say() { printf 'setup: %s\n' "$*"; }

# ---- 1. Debian packages ---------------------------------------------------------
DEB_PACKAGES=(podman runc debootstrap iptables uidmap slirp4netns fuse-overlayfs
  python3 python3-venv python3-dev gcc make git rsync ca-certificates curl shellcheck)
# Capabilities that need more list them in requirements/<topic>.deb, one a line.
while read -r extra; do
  [[ -n "$extra" && "$extra" != \#* ]] && DEB_PACKAGES+=("$extra")
done < <(cat requirements/*.deb 2>/dev/null || true)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "setup.sh: missing Debian packages: ${missing[*]}" >&2
    echo "setup.sh: run as root on Debian/Ubuntu, or install them yourself" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The tests need promtool and amtool only: the daemons these packages start on a booted
  # machine would hold ports 9090/9093/9100 and run forever. Stop and disable only what this
  # run installed; an operator's own Prometheus is left alone.
  for unit in prometheus prometheus-alertmanager prometheus-node-exporter; do
    if [[ " ${missing[*]} " == *" $unit "* ]] && [[ -d /run/systemd/system ]]; then
      say "stopping and disabling $unit (installed for its tools only)"
      systemctl disable --now "$unit" >/dev/null 2>&1 || true
    fi
  done
else
  say "Debian packages present"
fi

# ---- 2. virtualenv ------------------------------------------------------------------
req_hash=$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)
req_args=()
for f in requirements/*.txt; do
  [[ "$f" == requirements/constraints.txt ]] || req_args+=(-r "$f")
done
stamp="$GPUCLOUD_VENV/.gpucloud-requirements"
if [[ ! -x "$GPUCLOUD_VENV/bin/python" ]]; then
  say "creating virtualenv $GPUCLOUD_VENV"
  python3 -m venv "$GPUCLOUD_VENV"
fi
if [[ "$(cat "$stamp" 2>/dev/null)" != "$req_hash" ]]; then
  say "installing pinned Python requirements"
  "$GPUCLOUD_VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "${req_args[@]}" -c requirements/constraints.txt
  echo "$req_hash" > "$stamp"
else
  say "virtualenv up to date"
fi

# ---- 3. collection symlink ----------------------------------------------------------
link="$ANSIBLE_COLLECTIONS_PATH/ansible_collections/gpucloud/fleet"
if [[ ! -L "$link" ]]; then
  mkdir -p "$(dirname "$link")"
  ln -sfn ../../../.. "$link"
fi

# ---- 4. ansible-test get-pip stand-in -----------------------------------------------
# ansible-test downloads get-pip.py from an Ansible CI host that this network cannot
# reach; it uses ~/.ansible/test/cache/get_pip_<ver>.py when present. Ours bootstraps
# pip from the interpreter itself and installs what ansible-test asked for from PyPI.
getpip_ver=$("$GPUCLOUD_VENV/bin/python" - <<'PY'
import pathlib, re, ansible_test
src = pathlib.Path(ansible_test.__file__).parent.joinpath("_internal", "python_requirements.py").read_text()
m = re.search(r"default_packages = dict\(\s*pip='([\d.]+)'", src)
print(m.group(1).replace(".", "_") if m else "")
PY
)
if [[ -n "$getpip_ver" ]]; then
  mkdir -p "$HOME/.ansible/test/cache"
  install -m 0644 scripts/get_pip_standin.py "$HOME/.ansible/test/cache/get_pip_${getpip_ver}.py"
else
  say "warning: could not read the pip version ansible-test bootstraps; sanity may try to download get-pip.py"
fi

# ---- 5. base images -----------------------------------------------------------------
if ((WANT_IMAGES)); then
  scripts/build-images.sh
fi
say "done"
