# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Redact secrets in every file of a log bundle, in place (collect_logs.yml).

    redact.py DIR PATTERNS_JSON     # PATTERNS_JSON: [{"regexp": ..., "replace": ...}, ...]

Python regular expressions, applied in order to each regular file under DIR (binary
files are skipped). Prints {"files": n, "redactions": {relative path: count}} as JSON.
"""

import json
import os
import re
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    root, patterns = argv[1], [(re.compile(p["regexp"]), p["replace"]) for p in json.loads(argv[2])]
    counts, files = {}, 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            with open(path, "rb") as handle:
                data = handle.read()
            if b"\0" in data[:8192]:
                continue
            text = data.decode("utf-8", errors="surrogateescape")
            total = 0
            for regexp, replace in patterns:
                text, n = regexp.subn(replace, text)
                total += n
            files += 1
            if total:
                counts[os.path.relpath(path, root)] = total
                with open(path, "wb") as handle:
                    handle.write(text.encode("utf-8", errors="surrogateescape"))
    print(json.dumps({"files": files, "redactions": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
