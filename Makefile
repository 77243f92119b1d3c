# gpucloud.fleet — every entry point. Each target installs what it needs itself
# (scripts/setup.sh is idempotent and quick when everything is present).
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help setup test lint sanity units molecule build lab-up lab-down lab-list bench

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup: ## install Debian packages, the venv and the base images (idempotent)
	scripts/setup.sh

test: ## the whole suite: lint, sanity, unit tests, every Molecule scenario, build
	scripts/test.sh

lint: ## yamllint + ansible-lint (production profile)
	scripts/test.sh setup lint

sanity: ## ansible-test sanity on the collection
	scripts/test.sh setup sanity

units: ## pytest unit tests
	scripts/test.sh setup units

molecule: ## every Molecule scenario (MOLECULE_SCENARIOS="a b" for some)
	scripts/test.sh setup molecule

build: ## build the collection tarball and install it into build/install
	scripts/test.sh setup build

lab-list: ## list lab nodes
	@source scripts/env.sh && scripts/lab.py list

lab-up: ## the main job: bring up the lab fleet and provision it with site.yml
	scripts/main-job.sh up

lab-down: ## tear the lab fleet down (containers and network)
	scripts/main-job.sh down

bench: ## benchmarks (minutes; writes docs/benchmarks.md), never part of make test
	scripts/setup.sh
	source scripts/env.sh && bench/site_scaling.py && python bench/modules_vs_ping.py --lab
