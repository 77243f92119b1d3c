# shellcheck shell=bash
# The package, apt source, pin and unit state of a node, as one hash (prepare.yml, side_effect.yml).
set -o pipefail
{ dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n'
  dpkg --get-selections
  ls -la --time-style=full-iso /etc/apt/sources.list.d /etc/apt/preferences.d /etc/apt/keyrings /etc/systemd/system 2>&1
  systemctl list-unit-files --no-legend 'nvidia*' || true; } | sha256sum
