# kws: `make app` opens the review app on the sample queue; `make test` runs the tests.
# Both set up ./.venv first (scripts/setup.sh; torch is installed only when not importable).

.PHONY: setup app test lint check-samples

.venv/.kws-setup: pyproject.toml scripts/setup.sh
	./scripts/setup.sh
	touch $@

setup: .venv/.kws-setup

app: setup
	.venv/bin/kws

test: setup
	.venv/bin/ruff check .
	.venv/bin/python -m pytest -q

check-samples: setup
	@for t in sample_queue/tasks/*/; do .venv/bin/kws check "$$t"; echo "exit $$?"; done
