# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""CUDA toolkit -> minimum Linux x86_64 driver, and driver version comparison.

Pure functions raising ``ValueError``; the ``cuda_min_driver`` and
``cuda_driver_compatible`` filters are thin wrappers around them.
"""


import re

# NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit and Corresponding
# Driver Versions", column "Linux x86_64 Driver Version", as published in the
# CUDA 13.2 Update 2 release notes:
# https://docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html
# Keyed by (major, minor, update); update 0 is the GA release. CUDA 12.7 was
# never released. CUDA 11.0 is the exception to "update 0 is GA": its rows are
# 11.0.1 RC, 11.0.2 GA and 11.0.3 Update 1 (see _GA_UPDATE).
TOOLKIT_DRIVERS = {
    (13, 2, 2): "595.71.05",
    (13, 2, 1): "595.58.03",
    (13, 2, 0): "595.45.04",
    (13, 1, 1): "590.48.01",
    (13, 1, 0): "590.44.01",
    (13, 0, 2): "580.95.05",
    (13, 0, 1): "580.82.07",
    (13, 0, 0): "580.65.06",
    (12, 9, 1): "575.57.08",
    (12, 9, 0): "575.51.03",
    (12, 8, 1): "570.124.06",
    (12, 8, 0): "570.26",
    (12, 6, 3): "560.35.05",
    (12, 6, 2): "560.35.03",
    (12, 6, 1): "560.35.03",
    (12, 6, 0): "560.28.03",
    (12, 5, 1): "555.42.06",
    (12, 5, 0): "555.42.02",
    (12, 4, 1): "550.54.15",
    (12, 4, 0): "550.54.14",
    (12, 3, 1): "545.23.08",
    (12, 3, 0): "545.23.06",
    (12, 2, 2): "535.104.05",
    (12, 2, 1): "535.86.09",
    (12, 2, 0): "535.54.03",
    (12, 1, 1): "530.30.02",
    (12, 1, 0): "530.30.02",
    (12, 0, 1): "525.85.12",
    (12, 0, 0): "525.60.13",
    (11, 8, 0): "520.61.05",
    (11, 7, 1): "515.48.07",
    (11, 7, 0): "515.43.04",
    (11, 6, 2): "510.47.03",
    (11, 6, 1): "510.47.03",
    (11, 6, 0): "510.39.01",
    (11, 5, 2): "495.29.05",
    (11, 5, 1): "495.29.05",
    (11, 5, 0): "495.29.05",
    (11, 4, 4): "470.82.01",
    (11, 4, 3): "470.82.01",
    (11, 4, 2): "470.57.02",
    (11, 4, 1): "470.57.02",
    (11, 4, 0): "470.42.01",
    (11, 3, 1): "465.19.01",
    (11, 3, 0): "465.19.01",
    (11, 2, 2): "460.32.03",
    (11, 2, 1): "460.32.03",
    (11, 2, 0): "460.27.03",
    (11, 1, 1): "455.32",
    (11, 1, 0): "455.23",
    (11, 0, 3): "450.51.06",
    (11, 0, 2): "450.51.05",
    (11, 0, 1): "450.36.06",
}
_GA_UPDATE = {(11, 0): 2}

# Table 2 of the same page, "Minimum Required Driver Version for CUDA Minor
# Version Compatibility": 11.x needs 450.80.02 (footnote ***), 12.x the 12.0 GA
# driver, 13.x a 580 driver.
MINOR_COMPAT_FLOORS = {11: "450.80.02", 12: "525.60.13", 13: "580"}

_CUDA_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")
_DRIVER_RE = re.compile(r"^\d+\.\d+(?:\.\d+)?$")
# CUDA updates are numbered 1, 2, 3...; a larger third field is a component
# build number (nvcc's 12.2.140), which says nothing about the toolkit update.
_MAX_UPDATE = 9


def _text(value, what):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("%s must be a version string, got %r" % (what, value))
    return str(value).strip()


def parse_cuda_version(version):
    """Return (major, minor, update) for '12.2' / '12.2.0' / '12.2.2'; update None for 'X.Y'."""
    text = _text(version, "CUDA version")
    match = _CUDA_RE.match(text)
    if not match:
        raise ValueError("CUDA version %r is malformed: expected MAJOR.MINOR or MAJOR.MINOR.UPDATE" % (version,))
    update = match.group(3)
    return int(match.group(1)), int(match.group(2)), None if update is None else int(update)


def parse_driver_version(version):
    """Return the driver version as a tuple of ints ('535.54.03' -> (535, 54, 3))."""
    text = _text(version, "driver version")
    if not _DRIVER_RE.match(text):
        raise ValueError("driver version %r is malformed: expected e.g. 535.104.05" % (version,))
    return tuple(int(part) for part in text.split("."))


def _as_tuple(version):
    return tuple(int(part) for part in str(version).split("."))


def compare_driver_versions(left, right):
    """Compare two driver versions numerically per component: -1, 0 or 1.

    Missing components count as 0, so '570.26' == '570.26.0' < '570.124.06'.
    """
    a, b = list(parse_driver_version(left)), list(parse_driver_version(right))
    width = max(len(a), len(b))
    a += [0] * (width - len(a))
    b += [0] * (width - len(b))
    return (a > b) - (a < b)


def _at_least(driver, floor):
    a, b = list(driver), list(_as_tuple(floor))
    width = max(len(a), len(b))
    return a + [0] * (width - len(a)) >= b + [0] * (width - len(b))


def known_cuda_versions():
    """Return the 'MAJOR.MINOR' toolkit releases the table covers, oldest first."""
    return ["%d.%d" % key for key in sorted(set((k[0], k[1]) for k in TOOLKIT_DRIVERS))]


def cuda_min_driver(version):
    """Return the minimum Linux x86_64 driver of a CUDA toolkit release.

    'X.Y' and 'X.Y.0' name the GA release (for 11.0 that is 11.0.2). 'X.Y.Z'
    names update Z and returns that row of the table; an update the table does
    not list (12.3.2, say) gets the row of the newest listed release of that
    minor before it, because an update never needs an older driver than the
    one before it. Raises ValueError for malformed or unknown versions.
    """
    major, minor, update = parse_cuda_version(version)
    rows = sorted(key[2] for key in TOOLKIT_DRIVERS if key[:2] == (major, minor))
    if not rows:
        raise ValueError("CUDA %d.%d is not in NVIDIA's driver table (known: %s)"
                         % (major, minor, ", ".join(known_cuda_versions())))
    ga = _GA_UPDATE.get((major, minor), 0)
    if update is None or update == 0:
        update = ga
    if update > _MAX_UPDATE:
        raise ValueError("CUDA version %r: %d is not a toolkit update number (use MAJOR.MINOR or "
                         "MAJOR.MINOR.UPDATE, not a component version such as nvcc's)" % (version, update))
    listed = [row for row in rows if row <= update]
    return TOOLKIT_DRIVERS[(major, minor, listed[-1])]


def driver_supports_cuda(driver, cuda_version, minor_compat=False):
    """Tell whether a driver meets a CUDA release's minimum driver.

    With minor_compat, CUDA minor version compatibility applies: any driver at
    or above the major release's floor (11.x 450.80.02, 12.x 525.60.13, 13.x
    580) runs that major's toolkits, with the limits NVIDIA documents (no PTX
    JIT of newer PTX, some APIs need the newer driver).
    """
    parsed = parse_driver_version(driver)
    if _at_least(parsed, cuda_min_driver(cuda_version)):
        return True
    if minor_compat:
        major = parse_cuda_version(cuda_version)[0]
        floor = MINOR_COMPAT_FLOORS.get(major)
        return floor is not None and _at_least(parsed, floor)
    return False
