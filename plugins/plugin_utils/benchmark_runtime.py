# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which PyTorch build the training benchmark installs on a node, and its pip requirements.

PyTorch publishes one wheel per CUDA build (local version labels ``+cu126``, ``+cu128``,
``+cu130`` on https://download.pytorch.org/whl/<variant>, and ``+cpu``); each wheel brings its
own CUDA runtime libraries, so what has to match the node is the driver: a build for CUDA X.Y
runs on a driver that supports X.Y. The collection's version lock already pairs the driver with
a CUDA version (cuda_driver_compatible), so the build chosen is the newest one whose CUDA
version is not above the lock's. Pure functions; ``ValueError`` for what cannot be chosen.
"""


import re

# Matched with fullmatch: "$" would let a trailing newline (a second pip argument) through.
_VARIANT_RE = re.compile(r"cu(\d+)(\d)")
_CUDA_RE = re.compile(r"(\d+)\.(\d+)(?:\.\d+)*")
_VERSION_RE = re.compile(r"\d+(\.\d+)*")


def variant_cuda(variant):
    """(major, minor) of a PyTorch CUDA build name: cu128 -> (12, 8), cu130 -> (13, 0)."""
    match = _VARIANT_RE.fullmatch(variant or "")
    if not match:
        raise ValueError("%r is not a PyTorch CUDA build name (cuXYZ, e.g. cu128)" % (variant,))
    return int(match.group(1)), int(match.group(2))


def torch_variant(lock_cuda, variants):
    """The newest of VARIANTS (cuXYZ names) whose CUDA is not newer than LOCK_CUDA ("12.8").

    An empty LOCK_CUDA (a profile without CUDA, the lab) gives "cpu".
    """
    lock_cuda = str(lock_cuda or "")
    if not lock_cuda.strip():
        return "cpu"
    match = _CUDA_RE.fullmatch(lock_cuda)
    if not match:
        raise ValueError("the version lock's CUDA %r is not MAJOR.MINOR" % (lock_cuda,))
    wanted = (int(match.group(1)), int(match.group(2)))
    fitting = sorted((variant_cuda(v), v) for v in variants if variant_cuda(v) <= wanted)
    if not fitting:
        raise ValueError("no PyTorch build among %s runs with CUDA %s (the oldest needs %d.%d)"
                         % (", ".join(variants), lock_cuda, *min(variant_cuda(v) for v in variants))
                         if variants else "no PyTorch CUDA builds given")
    return fitting[-1][1]


def requirements(torch, torchvision, nvidia_ml_py, variant, torchvision_variant="same"):
    """Exact pip requirements: torch and torchvision of the build VARIANT, nvidia-ml-py.

    VARIANT "" (or "none") pins the plain versions, as PyPI publishes them (its Linux wheels are
    CUDA builds too; which one is the index's business); otherwise the local label +VARIANT.
    TORCHVISION_VARIANT "same" gives torchvision the same label; a build name or "none" another
    (a wheelhouse that has torch's +cpu build but only PyPI's plain torchvision, the lab).
    """
    for name, value in (("torch", torch), ("torchvision", torchvision), ("nvidia-ml-py", nvidia_ml_py)):
        if not _VERSION_RE.fullmatch(str(value or "")):
            raise ValueError("%s version %r is not a plain release version (e.g. 2.13.0)" % (name, value))
    variant = str(variant or "")
    tv_variant = variant if torchvision_variant in (None, "", "same") else str(torchvision_variant)
    labels = []
    for build in (variant, tv_variant):
        if build not in ("", "none", "cpu"):
            variant_cuda(build)
        labels.append("" if build in ("", "none") else "+" + build)
    return ["torch==%s%s" % (torch, labels[0]), "torchvision==%s%s" % (torchvision, labels[1]),
            "nvidia-ml-py==%s" % nvidia_ml_py]


def missing(installed, wanted):
    """The WANTED requirements (name==version) that INSTALLED ({dist: version}) does not satisfy exactly."""
    out = []
    for req in wanted:
        name, _sep, version = req.partition("==")
        if (installed or {}).get(name) != version:
            out.append(req)
    return out


# The benchmarks the program knows: the settings each requires, and those it may take.
_INT_KEYS = ("batch_size", "image_size", "warmup_steps", "steps", "seq_len", "max_predictions", "num_layers",
             "hidden_size", "num_heads", "intermediate_size", "vocab_size", "max_position", "type_vocab_size")
BENCHMARK_KEYS = {
    "resnet50": {"required": ("batch_size", "image_size", "warmup_steps", "steps"),
                 "optional": ("channels_last",)},
    "bert_base": {"required": ("batch_size", "seq_len", "max_predictions", "warmup_steps", "steps"),
                  "optional": ("num_layers", "hidden_size", "num_heads", "intermediate_size", "vocab_size",
                               "max_position", "type_vocab_size", "dropout")},
}


def benchmark_problems(benchmarks, name="training_benchmark_benchmarks"):
    """What is wrong with the benchmark settings BENCHMARKS, as messages naming NAME; [] when fine.

    Whole numbers > 0 (warmup_steps >= 0), channels_last a boolean, dropout in [0, 1), the BERT
    hidden size a multiple of its heads and max_predictions <= seq_len <= max_position.
    """
    if not isinstance(benchmarks, dict) or not benchmarks:
        return ["%s must name at least one benchmark (%s) with its settings, got %r"
                % (name, ", ".join(sorted(BENCHMARK_KEYS)), benchmarks)]
    problems = []
    for bench, settings in sorted(benchmarks.items()):
        where = "%s.%s" % (name, bench)
        if bench not in BENCHMARK_KEYS:
            problems.append("%s: unknown benchmark (known: %s)" % (where, ", ".join(sorted(BENCHMARK_KEYS))))
            continue
        if not isinstance(settings, dict):
            problems.append("%s must be a mapping of settings, got %r" % (where, settings))
            continue
        keys = BENCHMARK_KEYS[bench]
        before = len(problems)
        for key in keys["required"]:
            if key not in settings:
                problems.append("%s.%s is required" % (where, key))
        for key, value in sorted(settings.items()):
            if key not in keys["required"] + keys["optional"]:
                problems.append("%s.%s: unknown setting (known: %s)"
                                % (where, key, ", ".join(keys["required"] + keys["optional"])))
            elif key in _INT_KEYS:
                low = 0 if key == "warmup_steps" else 1
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    problems.append("%s.%s must be a whole number >= %d, got %r" % (where, key, low, value))
            elif key == "channels_last" and not isinstance(value, bool):
                problems.append("%s.%s must be true or false, got %r" % (where, key, value))
            elif key == "dropout" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                       or not 0 <= value < 1):
                problems.append("%s.%s must be a number in [0, 1), got %r" % (where, key, value))
        if bench == "bert_base" and len(problems) == before:
            hidden, heads = settings.get("hidden_size", 768), settings.get("num_heads", 12)
            if hidden % heads:
                problems.append("%s: hidden_size %d is not a multiple of num_heads %d" % (where, hidden, heads))
            if not settings["max_predictions"] <= settings["seq_len"] <= settings.get("max_position", 512):
                problems.append("%s: needs max_predictions <= seq_len <= max_position (%d, %d, %d)"
                                % (where, settings["max_predictions"], settings["seq_len"],
                                   settings.get("max_position", 512)))
    return problems
