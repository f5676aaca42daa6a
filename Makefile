# Two commands from a fresh clone (see README): `make book` and `make test`.
# Each first creates .venv with the pinned dependencies of requirements.lock.
# Override the torch pin for your platform, e.g. `make test TORCH="torch==2.5.1"`, and the number of test
# processes with WORKERS (2, the cores of CI's machine; `make test WORKERS=auto` takes one per core).

PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
WORKERS ?= 2
BIN    := $(VENV)/bin
BOOK   := _build/html
CODE   := conftest.py lecture_lib tests book notebooks/*.py

.PHONY: book test unit lint format notebooks clean prose

$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$(TORCH)" -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

## book: execute the notebooks that `make test` has not executed for this code (quick profile, on WORKERS
## processes; pytest's exit 5 means there was none left), render the HTML book into _build/html from those
## outputs, then check that it loads nothing from the web (check_offline) and opens without script errors in
## Chromium (check_browser)
book: $(VENV)/.installed
	LECTURE_PROFILE=quick $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup notebooks --skip-executed -q || [ $$? -eq 5 ]
	LECTURE_PROFILE=quick $(BIN)/jupyter-book build . --config book/_config.yml --toc book/_toc.yml --warningiserror --keep-going
	$(BIN)/python book/check_offline.py $(BOOK)
	$(BIN)/python book/check_browser.py $(BOOK)

## test: unit tests and every notebook executed by nbval (quick profile), on WORKERS processes (pytest-xdist;
## --dist loadgroup keeps each notebook's cells on one worker and spreads the unit tests one by one). After its
## cells, each notebook is executed again from the filled cache and must print the same text, and its prose may
## quote no result the run did not print (tests/notebook_checks.py). Each notebook that passes is kept for
## `make book` (tests/executed_notebooks.py); the 20 slowest items are listed.
test: $(VENV)/.installed
	LECTURE_PROFILE=quick $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup

## unit: the unit tests alone (tests/, no notebook), on WORKERS processes: the loop to run before a commit
unit: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(WORKERS) -q tests

## lint: ruff's linter on the code, then its formatter's check (line length 120, [tool.ruff.format] in
## pyproject.toml); changes nothing
lint: $(VENV)/.installed
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

## format: rewrite the code with ruff's formatter and regenerate the notebooks from their rewritten sources
format: $(VENV)/.installed
	$(BIN)/ruff format $(CODE)
	$(BIN)/jupytext --to ipynb --update notebooks/[0-9]*.py

## notebooks: regenerate each output-free .ipynb from its py:percent source
notebooks: $(VENV)/.installed
	$(BIN)/jupytext --to ipynb --update notebooks/[0-9]*.py

## prose: each chapter's prose measures against the course's targets (tests/prose.py; tests/test_prose.py holds
## them in `make test`, with the chapters that still miss some listed in its STILL_MISSING)
prose: $(VENV)/.installed
	$(BIN)/python -m tests.prose notebooks/[0-9]*.ipynb

clean:
	rm -rf _build $(VENV)

## gpu-check: every notebook (quick profile) on the GPU from an empty cache, cell by cell, printing slow cells'
## times and the first failing cell's traceback, then the CUDA-only tests. Refused without a GPU;
## `make gpu-check DEVICE=cpu` runs the same check on the CPU.
DEVICE ?= cuda
.PHONY: gpu-check
gpu-check: $(VENV)/.installed
	$(BIN)/python -m lecture_lib.bench gpu_check --device $(DEVICE)
