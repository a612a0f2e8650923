# kws: `make app` opens the review app on the sample queue; `make test` runs the tests.
# Both set up ./.venv first (scripts/setup.sh; torch is installed only when not importable);
# `make app` also installs what the bundled queues need (the pallas and prove extras and the
# real-kernel libraries, scripts/install_realkernels.py);
# `make test` also installs what the tests exercise: the ray, pallas, cuda-read and prove extras and
# the real-kernel libraries (scripts/install_realkernels.py, --no-deps so torch stays pinned).
# `make test` and `make test-fast` run ruff and mypy first (zero errors: pyproject's [tool.mypy]).
# `make test-fast` runs the tests that start no task code (the unit, git and tui tiers, minus
# those marked slow; tests/conftest.py assigns the tiers) and prints its wall time;
# `make test-battery` runs the battery tier. `make test` runs them all (CI: .ci/run).

.PHONY: setup app test test-fast test-battery lint check-samples

FAST_TIERS = not battery and not system and not slow

.venv/.kws-setup: pyproject.toml scripts/setup.sh
	./scripts/setup.sh
	touch $@

setup: .venv/.kws-setup

# what the bundled queues need to be judged (the Pallas samples: the pallas extra; the
# real-kernel samples: Liger-Kernel and FlagGems, --no-deps), so `make app` judges them all
.venv/.kws-app-setup: .venv/.kws-setup pyproject.toml scripts/setup.sh scripts/install_realkernels.py
	KWS_EXTRAS=pallas,prove ./scripts/setup.sh
	.venv/bin/python scripts/install_realkernels.py
	touch $@

.venv/.kws-test-setup: .venv/.kws-app-setup pyproject.toml scripts/setup.sh scripts/install_realkernels.py
	KWS_EXTRAS=test,ray,pallas,cuda-read,prove ./scripts/setup.sh
	.venv/bin/python scripts/install_realkernels.py
	touch $@

app: .venv/.kws-app-setup
	.venv/bin/kws

test: .venv/.kws-test-setup
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/python -m pytest -q

test-fast: .venv/.kws-test-setup
	@t0=$$(date +%s); .venv/bin/ruff check . && .venv/bin/mypy && .venv/bin/python -m pytest -q -m "$(FAST_TIERS)"; rc=$$?; \
	echo "make test-fast: $$(( $$(date +%s) - t0 )) s wall, $$(uptime | sed 's/.*load average/load average/')"; \
	exit $$rc

test-battery: .venv/.kws-test-setup
	.venv/bin/python -m pytest -q -m battery

check-samples: .venv/.kws-app-setup
	@for t in sample_queue/tasks/*/; do .venv/bin/kws check "$$t"; echo "exit $$?"; done
