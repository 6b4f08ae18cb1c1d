import os as _os
import sys as _sys

__version__ = "0.1.0"

# in a kernel, `datasets` would draw a widget per load and parquet write, which executed notebooks keep (they show
# their own progress); set before any repro module imports datasets, which reads it once
if "ipykernel" in _sys.modules:
    _os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
