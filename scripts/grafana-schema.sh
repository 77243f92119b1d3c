#!/usr/bin/env bash
# Regenerate the JSON Schemas the Grafana dashboard tests validate against
# (tests/fixtures/grafana/), from the TypeScript types of a pinned @grafana/schema:
#   dashboard.schema.json            the dashboard JSON (root type Dashboard)
#   panels/<type>.options.schema.json       a panel plugin's `options`
#   panels/<type>.fieldconfig.schema.json   its `fieldConfig.defaults.custom`
#
#   scripts/grafana-schema.sh           # rewrite the schemas and dashboard.schema.json.source
#   scripts/grafana-schema.sh --check   # exit 1 when a committed schema differs
#
# Needs node and npm (Debian: apt-get install nodejs npm) and the npm registry; the
# tests do not: they read the committed files. Everything npm fetches goes to a temporary
# directory outside the repository, removed on exit.
#
# Root type: `Dashboard` as the package exports it (dist/types/index.gen.d.ts, which
# re-exports veneer/dashboard.types): the model Grafana's frontend loads a dashboard JSON
# into (raw.Dashboard with panels as Panel | RowPanel and nullable data source refs on
# variables and annotations). `--expose none` inlines every type: with the default
# (`export`) the generator stops at two different types both named DataSourceRef (the
# common one and the dashboard one). Objects get additionalProperties false (the
# generator's default), so a key the type does not name is refused.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR="$ROOT/tests/fixtures/grafana"

GRAFANA_SCHEMA_VERSION=13.2.3
GENERATOR_VERSION=2.4.0   # the last release that runs on Debian 12's node 18 (2.5+ want node >= 22)
TYPESCRIPT_VERSION=5.9.3
PKG=node_modules/@grafana/schema/dist/types
ENTRY=$PKG/index.gen.d.ts
ROOT_TYPE=Dashboard
# Grafana panel type id -> directory of its panelcfg types under raw/composable, and
# whether the plugin has a FieldConfig of its own (stat has none: its custom is empty).
PANELS=("stat stat no" "table table yes" "timeseries timeseries yes" "state-timeline statetimeline yes")

check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "grafana-schema.sh: $tool not found (apt-get install nodejs npm)" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >package.json <<EOF
{
  "name": "gpucloud-grafana-schema",
  "private": true,
  "dependencies": {
    "@grafana/schema": "$GRAFANA_SCHEMA_VERSION",
    "ts-json-schema-generator": "$GENERATOR_VERSION",
    "typescript": "$TYPESCRIPT_VERSION"
  }
}
EOF
npm install --no-audit --no-fund --loglevel=error >&2
GENERATE=(npx --no-install ts-json-schema-generator --expose none --jsDoc extended)

mkdir -p out/panels
# The generator writes the types' doc comments as they are, with a few typographic quotes
# (U+2019): the file is rewritten with JSON's \u escapes for anything not ASCII, which
# parses to exactly the same schema (ansible-test's no-smart-quotes check reads the text).
generate() {   # PATH TYPE OUT
  "${GENERATE[@]}" --path "$1" --type "$2" --out "$3.raw" >&2
  python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1], encoding="utf-8")), sys.stdout, indent=2, ensure_ascii=True); print()' \
    "$3.raw" >"$3"
  rm "$3.raw"
}
generate "$ENTRY" "$ROOT_TYPE" out/dashboard.schema.json
panel_lines=""
for spec in "${PANELS[@]}"; do
  read -r id dir own_field_config <<<"$spec"
  types=$PKG/raw/composable/$dir/panelcfg/x/types.gen.d.ts
  generate "$types" Options "out/panels/$id.options.schema.json"
  panel_lines+="  panels/$id.options.schema.json: type Options of $types"$'\n'
  if [[ $own_field_config == yes ]]; then
    generate "$types" FieldConfig "out/panels/$id.fieldconfig.schema.json"
    panel_lines+="  panels/$id.fieldconfig.schema.json: type FieldConfig of $types"$'\n'
  fi
done
# The schemaVersion the package's own default dashboard carries: what our dashboards declare.
schema_version=$(node -e "console.log(require('@grafana/schema').defaultDashboard.schemaVersion)")

if ((check)); then
  rc=0
  for file in $(cd out && find . -name '*.json' | sort); do
    if ! cmp -s "out/$file" "$OUT_DIR/$file"; then
      echo "grafana-schema.sh: $OUT_DIR/$file differs from what the pinned versions generate" >&2
      diff -u "$OUT_DIR/$file" "out/$file" | head -40 >&2 || true
      rc=1
    fi
  done
  ((rc == 0)) && echo "grafana-schema.sh: the schemas in $OUT_DIR are up to date"
  exit "$rc"
fi

mkdir -p "$OUT_DIR/panels"
rm -f "$OUT_DIR"/panels/*.schema.json
cp out/dashboard.schema.json "$OUT_DIR/"
cp out/panels/*.schema.json "$OUT_DIR/panels/"
rm -f "$OUT_DIR"/panels/*.schema.json.source
while read -r line; do
  [[ -n $line ]] || continue
  file=${line%%:*}
  printf 'JSON Schema of the %s (npm @grafana/schema@%s).\nGenerated with the dashboard schema, as ../dashboard.schema.json.source says.\n' \
    "${line#*: }" "$GRAFANA_SCHEMA_VERSION" >"$OUT_DIR/$file.source"
done <<<"${panel_lines//  panels/panels}"
cat >"$OUT_DIR/dashboard.schema.json.source" <<EOF
JSON Schemas of a Grafana dashboard (the classic JSON model, the files Grafana's file
provisioning reads) and of the options of the panel plugins our dashboards use,
generated from the TypeScript types of the npm package @grafana/schema.
Regenerate with scripts/grafana-schema.sh (--check compares).

Generated: $(date -u +%Y-%m-%d) by scripts/grafana-schema.sh
Packages (npm, exact): @grafana/schema@$GRAFANA_SCHEMA_VERSION, ts-json-schema-generator@$GENERATOR_VERSION,
  typescript@$TYPESCRIPT_VERSION; node $(node --version), npm $(npm --version)
Resolved tree:
$(npm ls --depth=0 2>/dev/null | tail -n +2 | sed -e '/^$/d' -e 's/^/  /')
Command (in a scratch npm project holding the three packages), for each file:
  ${GENERATE[*]} --path <types> --type <type> --out <file>
  then re-serialised by Python's json module with ASCII escapes (indent 2, a final newline):
  the doc comments hold typographic quotes (U+2019), now written \\u2019; the parsed schema
  is the generator's, unchanged.
dashboard.schema.json: type \`$ROOT_TYPE\` of $ENTRY
${panel_lines}schemaVersion: $schema_version (defaultDashboard.schemaVersion of @grafana/schema@$GRAFANA_SCHEMA_VERSION; the
  dashboards declare it and tests/unit/monitoring/test_grafana_dashboards.py reads it from here)
Root type: \`$ROOT_TYPE\` as the package exports it, i.e. the veneer
  (veneer/dashboard.types: raw.Dashboard with panels Panel | RowPanel, and data source
  refs of variables and annotations that may be null), which is what Grafana's frontend
  reads a dashboard JSON into. The raw CUE-generated type (raw/dashboard/x/types.gen) is
  its base; the v2 resource schemas (schema/dashboard/v2*) describe the newer
  dashboard.grafana.app API objects, not this JSON.
Why --expose none: with the default (export) the generator stops with
  'Type "DataSourceRef" has multiple definitions' (common and dashboard both export one).
Strictness: objects have additionalProperties false, so keys the types do not name are
  refused (e.g. a query variable's "definition", which Grafana's own export writes but the
  type leaves out, or a table's options.footer, which the 13.x table panel no longer has:
  our dashboards use neither). refresh is a string (refresh: 30 fails), schemaVersion a
  number. Properties the types mark required are required here, also where Grafana would
  fill in a default (a table's frameIndex, a stat's percentChangeColorMode): the
  dashboards spell them out, as Grafana writes them on save. Queries (targets) and the
  values of field overrides stay open objects: no schema describes what is inside them.
EOF
echo "grafana-schema.sh: wrote the schemas and dashboard.schema.json.source under $OUT_DIR"
