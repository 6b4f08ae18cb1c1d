"""Stage 2, notebooks/02_analyze: statistics, figures and scorer agreement of a preference dataset."""
