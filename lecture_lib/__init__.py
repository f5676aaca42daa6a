"""lecture_lib: the implementations behind the course "Transformers and BERT".

Each module holds one idea and names the notebook section that teaches it.
"""

__version__ = "0.1.0"
