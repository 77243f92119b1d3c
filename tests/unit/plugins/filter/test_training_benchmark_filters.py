# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.training_benchmark import (
    training_benchmark_missing, training_benchmark_problems, training_benchmark_requirements)

VARIANTS = ["cu126", "cu128", "cu130"]


@pytest.mark.parametrize("lock,variant", [
    ("13.0", "cu130"), ("12.8", "cu128"), ("12.9", "cu128"), ("12.6", "cu126"), ("13.2", "cu130"),
    ("12.10", "cu128"), ("", "cpu"),
])
def test_build_follows_the_version_lock(lock, variant):
    label = "+" + variant
    assert training_benchmark_requirements(lock, "2.13.0", "0.28.0", "13.615.71", VARIANTS) == [
        "torch==2.13.0" + label, "torchvision==0.28.0" + label, "nvidia-ml-py==13.615.71"]


def test_explicit_build_and_plain_versions():
    assert training_benchmark_requirements("12.8", "2.13.0", "0.28.0", "13.615.71", VARIANTS, "cpu")[0] == "torch==2.13.0+cpu"
    assert training_benchmark_requirements("12.8", "2.13.0", "0.28.0", "13.615.71", VARIANTS, "none")[:2] == [
        "torch==2.13.0", "torchvision==0.28.0"]


@pytest.mark.parametrize("lock,torch,variant", [
    ("12.4", "2.13.0", "auto"),        # older than every build
    ("twelve", "2.13.0", "auto"),
    ("12.8", "2.13.0+cu128", "auto"),  # the label comes from the build, not the version
    ("12.8", "2.13", "cuda"),
    ("12.8", "", "auto"),
])
def test_refusals_name_the_variables(lock, torch, variant):
    with pytest.raises(AnsibleFilterError, match="training_benchmark_cuda"):
        training_benchmark_requirements(lock, torch, "0.28.0", "13.615.71", VARIANTS, variant)


def test_missing_compares_exact_versions_with_labels():
    wanted = ["torch==2.13.0+cpu", "torchvision==0.28.0+cpu", "nvidia-ml-py==13.615.71"]
    # What the lab's virtualenv reports (importlib.metadata) once installed from the wheel cache.
    installed = {"torch": "2.13.0+cpu", "torchvision": "0.28.0", "nvidia-ml-py": "13.615.71"}
    assert training_benchmark_missing(installed, wanted) == ["torchvision==0.28.0+cpu"]
    assert training_benchmark_missing({}, wanted) == wanted
    with pytest.raises(AnsibleFilterError):
        training_benchmark_missing("torch 2.13.0", wanted)


def test_problems_name_the_setting():
    good = {"resnet50": {"batch_size": 2, "image_size": 64, "warmup_steps": 0, "steps": 3, "channels_last": True},
            "bert_base": {"batch_size": 2, "seq_len": 32, "max_predictions": 5, "warmup_steps": 1, "steps": 3}}
    assert training_benchmark_problems(good) == []
    assert training_benchmark_problems({}) == [
        "training_benchmark_benchmarks must name at least one benchmark (bert_base, resnet50) with its settings, got {}"]
    bad = {"resnet50": {"batch_size": 0, "image_size": "224", "warmup_steps": -1, "channels_last": "yes", "lr": 1},
           "bert_base": {"batch_size": 2, "seq_len": 32, "max_predictions": 64, "warmup_steps": 1, "steps": 3,
                         "hidden_size": 100, "num_heads": 12},
           "gpt": {}}
    problems = training_benchmark_problems(bad)
    assert problems == [
        "training_benchmark_benchmarks.bert_base: hidden_size 100 is not a multiple of num_heads 12",
        "training_benchmark_benchmarks.bert_base: needs max_predictions <= seq_len <= max_position (64, 32, 512)",
        "training_benchmark_benchmarks.gpt: unknown benchmark (known: bert_base, resnet50)",
        "training_benchmark_benchmarks.resnet50.steps is required",
        "training_benchmark_benchmarks.resnet50.batch_size must be a whole number >= 1, got 0",
        "training_benchmark_benchmarks.resnet50.channels_last must be true or false, got 'yes'",
        "training_benchmark_benchmarks.resnet50.image_size must be a whole number >= 1, got '224'",
        "training_benchmark_benchmarks.resnet50.lr: unknown setting (known: batch_size, image_size, warmup_steps, "
        "steps, channels_last)",
        "training_benchmark_benchmarks.resnet50.warmup_steps must be a whole number >= 0, got -1",
    ]


def test_torchvision_may_have_another_build():
    assert training_benchmark_requirements("", "2.13.0", "0.28.0", "13.615.71", VARIANTS, "cpu", "none") == [
        "torch==2.13.0+cpu", "torchvision==0.28.0", "nvidia-ml-py==13.615.71"]
    assert training_benchmark_requirements("12.8", "2.13.0", "0.28.0", "13.615.71", VARIANTS, "auto", "cu126")[1] == \
        "torchvision==0.28.0+cu126"
    with pytest.raises(AnsibleFilterError):
        training_benchmark_requirements("12.8", "2.13.0", "0.28.0", "13.615.71", VARIANTS, "auto", "rocm6")


# Issue 28 item 13: versions and build names end where the string ends; a newline would put a
# second requirement on pip's command line.
@pytest.mark.parametrize("lock,torch,variant", [
    ("12.8", "2.13.0\n", "auto"),
    ("12.8", "2.13.0\n--index-url=http://evil.example", "auto"),
    ("12.8", "2.13.0", "cu128\n"),
    ("12.8\n", "2.13.0", "auto"),
])
def test_a_trailing_newline_is_refused(lock, torch, variant):
    with pytest.raises(AnsibleFilterError, match="training_benchmark_cuda"):
        training_benchmark_requirements(lock, torch, "0.28.0", "13.615.71", VARIANTS, variant)
