"""One module per notebook: the chapter's sizes for both profiles, its cached runs and its experiments.

Only notebooks and ``lecture_lib.bench`` import from here; the rest of the package never does.
"""
