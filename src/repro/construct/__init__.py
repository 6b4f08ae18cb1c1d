"""Stage 1, notebooks/01_construct: rows -> (generated) candidates -> scores -> chosen/rejected pairs."""
