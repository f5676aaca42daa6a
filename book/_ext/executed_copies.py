"""The executed notebooks in ``_build/jupyter_execute``, with their outputs, when the book renders from the cache.

With ``execute_notebooks: cache``, myst-nb renders a page from the notebook merged with its cached outputs, but
the copy it writes to ``_build/jupyter_execute`` is the notebook as it read it, without outputs (with ``force``
it is the notebook it executed). What reads executed notebooks from that folder (the Reproductions page's
counts, ``python -m lecture_lib.reproductions summary _build/jupyter_execute``) needs the outputs: right after
myst-nb has read a notebook, this extension writes the merged copy over the empty one.
"""

from __future__ import annotations

from pathlib import Path

import nbformat


def write_executed_copy(app, doctree) -> None:
    config = app.env.mystnb_config
    copy = Path(config.output_folder) / f"{app.env.docname}.ipynb"
    if config.execution_mode != "cache" or not copy.exists():
        return  # not a notebook, or myst-nb wrote the executed notebook itself
    from jupyter_cache import get_cache

    try:
        _, executed = get_cache(config.execution_cache_path).merge_match_into_notebook(nbformat.read(copy, 4))
    except KeyError:  # not in the cache: myst-nb executed it, and wrote its outputs there itself
        return
    nbformat.write(executed, copy)


def setup(app):
    app.connect("doctree-read", write_executed_copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
