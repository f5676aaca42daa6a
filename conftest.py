"""The repository's root conftest: registers the plugin that executes each notebook once for both `make test`
and `make book` and schedules the notebooks first (see tests/executed_notebooks.py)."""

pytest_plugins = ("tests.executed_notebooks",)
