#!/usr/bin/env bash
# Prints what a check run of site.yml must leave as it was on a lab node: the package
# database, every file and link under /etc, /usr/local and the collection's state
# directories, the pending-reboot record in /run, and the first MiB of the lab data disk (where a LUKS header would go).
set -euo pipefail
export LC_ALL=C
sha256sum /var/lib/dpkg/status
for dir in /etc /usr/local /var/lib/gpucloud /var/db/tang; do
  [[ -d "$dir" ]] || continue
  find "$dir" -xdev -type f -print0 | sort -z | xargs -0 -r sha256sum
  find "$dir" -xdev -type l -printf '%p -> %l\n' | sort
done
# The pending-reboot record (gpucloud.fleet.node_reboot): check mode only says it would write it.
for file in /run/reboot-required /run/reboot-required.pkgs /run/gpucloud/reboot-reasons; do
  [[ -f "$file" ]] && sha256sum "$file"
done
fact=/etc/ansible/facts.d/gpucloud_lab.fact
if [[ -f "$fact" ]]; then
  device=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data_device"])' "$fact")
  echo "$device $(head -c 1048576 "$device" | sha256sum)"
fi
