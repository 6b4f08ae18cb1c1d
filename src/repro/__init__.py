import os as _os
import sys as _sys

__version__ = "0.1.0"

# Inside a Jupyter kernel `datasets` draws a progress widget for every load and parquet write ("Generating train
# split: 0 examples"), which executed notebooks keep; the notebooks show their own progress, so datasets' bars are
# off there. Set before any repro module imports datasets (which reads it once, at import).
if "ipykernel" in _sys.modules:
    _os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
