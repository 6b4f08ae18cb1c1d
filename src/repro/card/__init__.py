"""The dataset card (notebooks/03_card): `facts` gathers and judges what the run recorded; `publish` renders the
body from `templates/`, writes the card with its YAML, checks, previews and publishes it."""

from ..dataset_io import split_files  # (the card's readers have called it repro.card.split_files)
from .facts import (SCORE_BLOCKS, CardFacts, SplitFacts, effective_parameters, gather_facts, public_value,
                    shaping_parameters)
from .publish import (PublishError, build_card, card_data, check_card, facts_card_data, fmt, phrases, placeholders,
                      preview, preview_markdown, publish, refresh, render_body, render_section, size_category,
                      write_card)

__all__ = ["SCORE_BLOCKS", "CardFacts", "PublishError", "SplitFacts", "build_card", "card_data", "check_card",
           "effective_parameters", "facts_card_data", "fmt", "gather_facts", "phrases", "placeholders", "preview",
           "preview_markdown", "public_value", "publish", "refresh", "render_body", "render_section",
           "shaping_parameters", "size_category", "split_files", "write_card"]
