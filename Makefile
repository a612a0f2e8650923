# kws: `make app` opens the review app on the sample queue; `make test` runs the tests.
# Both set up ./.venv first (scripts/setup.sh; torch is installed only when not importable);
# `make test` also installs what the tests exercise: the ray, pallas and cuda-read extras and
# the real-kernel libraries (scripts/install_realkernels.py, --no-deps so torch stays pinned).

.PHONY: setup app test lint check-samples

.venv/.kws-setup: pyproject.toml scripts/setup.sh
	./scripts/setup.sh
	touch $@

setup: .venv/.kws-setup

.venv/.kws-test-setup: .venv/.kws-setup pyproject.toml scripts/setup.sh scripts/install_realkernels.py
	KWS_EXTRAS=test,ray,pallas,cuda-read ./scripts/setup.sh
	.venv/bin/python scripts/install_realkernels.py
	touch $@

app: setup
	.venv/bin/kws

test: .venv/.kws-test-setup
	.venv/bin/ruff check .
	.venv/bin/python -m pytest -q

check-samples: setup
	@for t in sample_queue/tasks/*/; do .venv/bin/kws check "$$t"; echo "exit $$?"; done
