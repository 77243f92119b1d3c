# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: training_benchmark_requirements.yml, training_benchmark_missing.yml and
# training_benchmark_problems.yml beside this file.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import benchmark_runtime


def training_benchmark_requirements(lock_cuda, torch, torchvision, nvidia_ml_py, variants, variant="auto",
                                    torchvision_variant="same"):
    """Exact pip requirements of the benchmark runtime for a node whose version lock says LOCK_CUDA."""
    try:
        chosen = benchmark_runtime.torch_variant(lock_cuda, list(variants or [])) if variant == "auto" else variant
        return benchmark_runtime.requirements(torch, torchvision, nvidia_ml_py, chosen, torchvision_variant)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("training_benchmark_requirements: %s (training_benchmark_cuda, "
                                 "training_benchmark_torch_variant(s), training_benchmark_torchvision_variant, "
                                 "training_benchmark_*_version)" % exc) from exc


def training_benchmark_missing(installed, wanted):
    """The requirements of WANTED that the INSTALLED {distribution: version} mapping does not meet exactly."""
    if not isinstance(installed, dict):
        raise AnsibleFilterError("training_benchmark_missing: expected a mapping of distribution to version, got %s"
                                 % type(installed).__name__)
    return benchmark_runtime.missing(installed, list(wanted))


def training_benchmark_problems(benchmarks, name="training_benchmark_benchmarks"):
    """What is wrong with the benchmark settings, each message naming the variable; [] when fine."""
    return benchmark_runtime.benchmark_problems(benchmarks, name)


class FilterModule(object):
    def filters(self):
        return {"training_benchmark_requirements": training_benchmark_requirements,
                "training_benchmark_missing": training_benchmark_missing,
                "training_benchmark_problems": training_benchmark_problems}
