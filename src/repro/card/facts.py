"""What the dataset card states: facts gathered from a run (or a dataset built elsewhere) and the judgements made on
them (PairRM's invariant checks, the length-bias verdict, the schema against the seed's); the sentences: templates/."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from datasets import Features, Value

from ..dataset_io import (NONFINITE, RESCORED_COLUMNS, SCORE_COLUMNS, SEED_FEATURES, column_values, prompt_id_of,
                          response_texts, same_responses, score_array, scores_digest, split_files,
                          write_split)
from ..errors import DataError, ParameterError, notice
from ..exporters import FORMATS, conversational, detect_format, seed_view
from ..formats import GIVEN_MARGIN, given_margins, holds_scores, refused_scores, refused_turns, trl_lacks
from ..manifest import NAMING, NOT_SHAPING, ROUNDING, Manifest, committed, same_scoring_code
from ..parameters import (BUILTIN_SCORERS, TO_FILL, CardParams, ConstructParams, GenerationParams, idle_parameters,
                          one_line, read_params_yaml, resolve_parameters, set_option, unused_generation)
from ..paths import (DATA_DIR, DEMO, RunDir, ascii_folder_safe, dataset_run_name, public_name, public_text,
                     reads_as_hub_id, shipped, within)
from ..records import CARD_COMPARE, CARD_METRICS, COMPARE_FIX, METRICS_FIX, read_record
from ..revisions import strings_in
from ..sources import held_splits, load_source, read_parquet
from ..subject import (claim, dataset_or_own, declared_scorer, declared_stand_ins, is_own_dataset, read_as_pairrm,
                       refuse_unbuilt)
CONFIG_NAME = "default"
SEED_REPO = FORMATS["seed"].source
PUBLISHED_PART2_DROP = {"part_start": 40000, "part_stop": 61135, "drop_rows": 400}  # 21,135 -> 20,735 rows
# unless given, a dataset built here from UltraFeedback's rows or the demo's has its sources' licence and language
# (UltraFeedback, H4's binarisation and PairRM are MIT; the rows are English); any other claims neither
BUILT_LICENSE = "mit"
BUILT_LANGUAGE = ["en"]
# the hub datasets of UltraFeedback's rows whose MIT licence a built dataset's card may state (ZHLiu627's in parts too)
ULTRAFEEDBACK = ("openbmb/UltraFeedback", "HuggingFaceH4/ultrafeedback_binarized",
                 "ZHLiu627/ultrafeedback_binarized_with_response_full")
SCORE_BLOCKS = ("score_chosen", "score_rejected", "margin")  # the analysis notebook's (issue 4), the table's order
LENGTH_BIAS_RHO = 0.1  # |Spearman rho| below this is negligible (the usual rule of thumb for rank correlations)
LENGTH_BIAS_P = 0.05
# a length bias is also called when the chosen response is the longer (or the shorter) in at least this share of
# the pairs whose lengths differ; on fewer rows than LENGTH_BIAS_ROWS none is judged
LENGTH_BIAS_SHARE = 0.6
LENGTH_BIAS_ROWS = 10
SMALL_ROWS = 1000  # a dataset of fewer rows is called small (the hub's smallest size category, n<1K)
MANY_TIES = 0.1  # ties are a limitation from this share of the pairs on (inverted pairs from one on)
TEXT_TYPES = (pa.string(), pa.large_string())
REBUILD_FILE, REBUILD_OUT = "rebuild.yaml", "runs/rebuild"  # the card's command: its params file, its run folder


def _is_text(feature: Any) -> bool:
    """A column of text, string or large_string (polars' parquet)."""
    return getattr(feature, "pa_type", None) in TEXT_TYPES


@dataclass
class SplitFacts:
    """One split as `push_to_hub` records it."""

    name: str
    num_bytes: int  # in-memory Arrow size (`Dataset._estimate_nbytes()`)
    num_examples: int
    download_size: int  # bytes of the parquet files
    files: list[str] = field(default_factory=list)  # relative to the dataset folder


@dataclass
class CardFacts:
    """Everything the card states, gathered from the run (or the dataset and `known_recipe`), and its judgements."""

    run: RunDir
    title: str
    features: Features
    splits: list[SplitFacts]
    built_here: bool
    license: str | None  # None: not stated (a dataset not built here whose licence was not given)
    language: list[str]
    hub_repo_id: str | None = None
    card_dataset: str | None = None  # the foreign dataset's spec, when not built here
    parameters_given: dict[str, Any] = field(default_factory=dict, repr=False)  # 03_card's own, for the record
    parameters: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    scorer: dict[str, Any] = field(default_factory=dict)
    scorers: list[dict[str, Any]] = field(default_factory=list)  # the manifest's `scorers` (several scorers)
    generation: dict[str, Any] = field(default_factory=dict)  # present when candidates were generated here
    stages: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)  # not built here: the card's run's (its repro)
    selfcheck: dict[str, Any] | None = None  # the `repro selfcheck` the run cites
    known_recipe: dict[str, str] = field(default_factory=dict)
    recipe_note: str | None = None  # known_recipe given as free text
    metrics: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None  # the run's compare.json
    figures: list[tuple[Path, str]] = field(default_factory=list)  # (PNG in the run's figures/, caption)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (section key, reason key) pairs
    empty_columns: list[str] = field(default_factory=list)  # null in every row of the main split
    nonfinite_scores: int = 0  # rows whose score_chosen or score_rejected is not a finite number: to_trl refuses them
    empty_chosen: int = 0  # rows (of finite scores) whose chosen response is empty: repro.formats.to_trl refuses them
    # {rows, first (its index among the rows kept, as to_trl numbers it), shape, column (refused_scores' or
    # refused_turns' of the first)}: the rows the card's code keeps that to_trl refuses (then it advises against
    # training); None: none
    trl_refused: dict[str, Any] | None = None
    # {positive, zero, negative} margins of the rows the card's code keeps, and `same`: those of one response twice
    # (chosen's and rejected's one text), not counted by their margin
    pair_signs: dict[str, int] | None = None
    prompt_id_sha256_rows: int | None = None  # rows whose prompt_id is sha256(prompt)
    # {column (prompt_id, else prompt: to_trl's prompt_id is its sha256), rows, values}: the rows that share a value of
    # it with another row, and the values they share; None where every row's is its own
    repeated_prompts: dict[str, Any] | None = None
    test_split: dict[str, Any] | None = None  # the manifest's `test_split`: the second split and how it was made
    other_splits: list[str] = field(default_factory=list)  # those of card_dataset that its copy here has not
    analysis_error: str | None = None  # why 02_analyze failed, as the manifest records it (no metrics then)
    # {chosen, rejected, generate_i: the roles of the turns most rows have, or None for a text column}, and the rows
    # whose turns differ from those
    turns: dict[str, list[str] | None] = field(default_factory=dict)
    other_turns: dict[str, int] = field(default_factory=dict)

    @property
    def chosen_text(self) -> str:
        """The card's code for a row's chosen response: a conversation's last turn, or the text itself."""
        return 'row["chosen"]' if _is_text(self.features.get("chosen")) else 'row["chosen"][-1]["content"]'

    @property
    def source_from_file(self) -> bool:
        """Whether the run read its source from one file (which has no splits: source_split went unused), the embedded
        demo's included (its manifest records source_split)."""
        load = self.stages.get("load") or {}
        return self.source_kind == "demo" or "split" in load and load["split"] is None

    @property
    def num_examples(self) -> int:
        """Rows of the first split: the one built as the train rows, analysed and counted in the manifest."""
        return self.splits[0].num_examples

    @property
    def drop_as_published(self) -> bool:
        """The slice and drop of the published part2 datasets, whose authors do not say why, or which rows."""
        return all(self.parameters.get(name) == value for name, value in PUBLISHED_PART2_DROP.items())

    @property
    def stand_in(self) -> bool:
        model = str(self.scorer.get("model") or self.parameters.get("scorer_model") or "")
        return bool(self.scorer.get("stand_in")) or model.startswith("builtin:")

    @property
    def scorer_unknown(self) -> bool:
        """A dataset not built here whose scorer nothing told the card: not a declared stand-in, not in known_recipe."""
        return not self.built_here and not self.scorer and not self.known_recipe.get("scorer")

    @property
    def against_training(self) -> str | None:
        """Why "Typical uses" advises against training on the pairs (its sentence's key), None where it offers them: a
        stand-in's scores or candidates, no pair the card's code keeps or none preferring its chosen, a scorer the card
        does not know, rows to_trl refuses; then the card neither tags the data `dpo` nor shows how to train on it."""
        signs = self.pair_signs or {"positive": 1}
        return next((why for why, holds in (
            ("stand_in", self.stand_in), ("stand_in_policy", self.generation.get("stand_in")),
            ("no_usable_rows", not sum(signs.values())), ("no_preference", not signs["positive"]),
            ("scorer_unknown", self.scorer_unknown), ("trl_refused", self.trl_refused)) if holds), None)

    @property
    def for_training(self) -> bool:
        return not self.against_training

    @property
    def scorer_model(self) -> Any:
        return public_value(self.scorer.get("model") or self.parameters.get("scorer_model"))

    @property
    def source_kind(self) -> str:
        """What a built dataset's licence rests on: `ultrafeedback` (by hub id), `demo` (repro's rows) or `other`."""
        source = str(self.parameters.get("source") or "")
        ultrafeedback = any(source == known or source.startswith(f"{known}_part") for known in ULTRAFEEDBACK)
        return "demo" if source == DEMO else "ultrafeedback" if ultrafeedback else "other"

    @property
    def scorer_kind(self) -> str:
        """`stand_in`, `pairrm` (llm-blender's MIT checkpoint) or `other` (a reward model of its own licence)."""
        return "stand_in" if self.stand_in else "pairrm" if "pairrm" in str(self.scorer_model).lower() else "other"

    def has_columns(self, *names: str) -> bool:
        return set(names) <= set(self.features)

    @property
    def sppo_scored_first(self) -> int | None:
        """SPPO's rows whose `rm_scores` hold the original pair's scores first (`first_scored_only`): the number of
        generated responses, that of the first scores `probability` is over (compute_prob.py's reading); else None."""
        p = self.parameters
        scored_first = p.get("original_pair_position") == "first_scored_only" and p.get("include_original_pair")
        generated = sum(name.startswith("generate_") for name in self.features)  # SPPO's generate_i
        return generated if p.get("output_format") == "sppo" and scored_first else None

    @property
    def layout(self) -> str:
        """Whose columns the dataset has (`repro.exporters.detect_format`): their descriptions are that layout's."""
        return detect_format(self.features)

    @property
    def prompt_in_turns(self) -> bool:
        """`prompt` is a conversation (TRL's conversational rows): its text is its user turn's."""
        return conversational(self.features)

    @property
    def conversations(self) -> list[str]:
        """Which of `prompt`, `chosen`, `rejected` hold conversations as stored (the card says how TRL reads that)."""
        return [c for c in ("prompt", "chosen", "rejected") if conversational(self.features, c)]

    @property
    def scored(self) -> bool:
        """The rows carry scores, to_trl's margins: the seed's two columns or a recipe's candidates' (the `rlhflow`
        format's `rewards` too; SELM's layout, SPPO's `_score` table and RLHFlow's margin-only pair table have none)."""
        return self.has_columns(*SCORE_COLUMNS) if self.layout == "seed" else holds_scores(self.features)

    @property
    def unread_scores(self) -> tuple[list[str], list[str]]:
        """(the score columns 02_analyze reads that rows of the seed's layout lack, their columns of numbers: the
        scores under other names, as Argilla's `chosen-rating`, or not); ([], []) where the rows are scored."""
        if self.scored or self.layout != "seed":
            return [], []
        numbers = [c for c, f in self.features.items() if isinstance(f, Value) and (
            pa.types.is_integer(f.pa_type) or pa.types.is_floating(f.pa_type))]
        return [c for c in SCORE_COLUMNS if c not in self.features], numbers

    @property
    def trl_ready(self) -> bool:
        """Whether repro.formats.to_trl reads the rows: their columns (`trl_lacks`), those the card's code keeps."""
        return not self.trl_refused and not trl_lacks(self.features)

    @property
    def trl_format(self) -> str | None:
        """Which of TRL's preference formats the rows are in as stored: `conversational` (as repro.formats.to_trl
        writes them: `prompt` a conversation, `chosen` / `rejected` the assistant's turn alone), `standard` (texts);
        None: neither (the seed's columns among them)."""
        responses = [self.turns.get("chosen", []), self.turns.get("rejected", [])]
        if self.layout != "seed" or not self.has_columns("prompt", "chosen", "rejected"):
            return None
        if self.prompt_in_turns:
            return "conversational" if responses == [["assistant"]] * 2 else None
        return "standard" if responses == [None, None] and _is_text(self.features["prompt"]) else None

    @property
    def schema(self) -> dict[str, Any]:
        """The columns against the seed's: `same`, `seed_plus` (its columns then `extra`), or `differs`."""
        extra = [c for c in self.features if c not in SEED_FEATURES]
        if list(self.features)[:len(SEED_FEATURES)] == list(SEED_FEATURES) and all(
                self.features[c] == SEED_FEATURES[c] for c in SEED_FEATURES):
            return {"kind": "seed_plus" if extra else "same", "extra": extra}
        return {"kind": "differs", "extra": extra, "missing": [c for c in SEED_FEATURES if c not in self.features],
                "changed": [c for c in SEED_FEATURES if c in self.features and self.features[c] != SEED_FEATURES[c]]}

    @property
    def rescored_columns(self) -> list[str]:
        """The columns `repro score` added to the rows (beside the `candidates` it scored): `scores`, `ranks`, and the
        input's values it kept as `input_<name>` where it wrote `<name>` anew from its scores."""
        if not self.has_columns(*RESCORED_COLUMNS):
            return []
        return [c for c in self.features
                if c in RESCORED_COLUMNS[1:] or c.startswith("input_") and c[6:] in self.features]

    @property
    def several_scorers(self) -> dict[str, Any] | None:
        """Which scorer decided and which others scored (None for a run scored by PairRM alone)."""
        scorers = self.scorers or [{"name": "primary", "column": "candidate_scores", "decides_pairs": True,
                                    **self.scorer}]
        if len(scorers) < 2 and all(s.get("kind", "pairrm") == "pairrm" for s in scorers):
            return None

        def public(s: dict[str, Any]) -> dict[str, Any]:  # a local folder by its name only
            spec = str(s.get("model") or "?")
            local = not spec.startswith("builtin:") and not reads_as_hub_id(spec)
            return {**s, "model": public_name(spec) if local else spec, "local": local, "kind": s.get("kind", "pairrm"),
                    "stand_in": bool(s.get("stand_in")) or spec.startswith("builtin:")}

        return {"decided": public(next(s for s in scorers if s.get("decides_pairs"))),
                "others": [public(s) for s in scorers if not s.get("decides_pairs")],
                "logits": any(s.get("kind") == "sequence_classifier" for s in scorers)}

    @property
    def excluded(self) -> int:
        return (self.metrics or {}).get("n_excluded", 0)

    @property
    def unscored(self) -> dict[str, int]:
        """{score column: rows the analysis left out for want of a finite score in it}."""
        reasons = (self.metrics or {}).get("excluded_reasons") or {}
        return {column: reasons[NONFINITE.format(column)] for column in SCORE_COLUMNS
                if reasons.get(NONFINITE.format(column))}

    @property
    def headline(self) -> dict[str, Any]:
        """The means of the score blocks, the margin's interval and its signs (None where the metrics lack them)."""
        means = [_get(self.metrics, b, "mean") for b in SCORE_BLOCKS]
        ci = _get(self.metrics, "margin", "mean_ci95")
        signs = _get(self.metrics, "margin_sign", "counts")
        return {"means": means if None not in means else None, "ci": ci if ci and None not in ci else None,
                "signs": signs if signs and {"positive", "zero", "negative"} <= signs.keys() else None}

    @property
    def statistics(self) -> list[dict[str, Any]]:
        """The statistics table: {stat, values} per score block, then the margin's {stat, margin} rows."""
        m, rows = self.metrics or {}, []
        for stat in ("mean", "median", "mean_ci95", "median_ci95"):
            values = [_get(m, b, stat) for b in SCORE_BLOCKS]
            if any(v is not None for v in values):
                rows.append({"stat": stat, "values": values})
        rows += [{"stat": "p_" + test, "margin": _get(m, "tests", test, "pvalue")}
                 for test in ("wilcoxon", "paired_t", "sign_test") if _get(m, "tests", test) is not None]
        effects = m.get("effect_size") or {}
        rows += [{"stat": effect, "margin": effects[effect]} for effect in ("cohens_dz", "rank_biserial")
                 if effect in effects]
        ties = m.get("ties")
        if ties is not None and m.get("n"):
            rows.append({"stat": "ties", "ties": ties, "percent": 100 * ties / m["n"]})
        rhos = {unit: {"rho": rho, "p": p} for unit, rho, p in self.length_rhos}
        gaps = self.length_gaps if rhos else {}  # (no unit's rho: the limitations say why)
        rows += [{"stat": "length", "unit": unit, **(rhos[unit] if unit in rhos else {"gap": gaps[unit]})}
                 for unit in self.length_units if unit in rhos or unit in gaps]
        return rows

    @property
    def checks(self) -> list[dict[str, Any]]:
        """PairRM's invariants: {check, holds: [k, n]}, or {check, not_applicable: why, ...}; {inversions: k}."""
        m = self.metrics or {}
        inv, n = m.get("invariants"), m.get("n")
        if inv is None or n is None:
            return []
        count = inv.get("inversions")
        inversions = [{"inversions": count}] if count else []  # (none: unsaid, as 0s are)
        if inv.get("expected_to_hold") is False:
            kind = str(_get(m, "scale", "kind"))
            return [{"check": c, "not_applicable": "not_pairrm", "kind": kind}
                    for c in ("sign", "antisymmetry", "sum")] + inversions
        rule = inv.get("selection")  # a pair rule other than best vs worst: no row's pair need be its extremes
        out = [{"check": "sign", "not_applicable": "selection", "rule": rule}] if rule else []
        if inv.get("sign_order_fails") is not None and not rule:
            out.append({"check": "sign", "holds": [n - inv["sign_order_fails"], n]})
        cand = inv.get("candidate_scores")
        two = _get(cand, "two_candidate_rows")
        if two == 0:
            out.append({"check": "antisymmetry", "not_applicable": "no_two",
                        "lo": _get(cand, "candidates_per_row", "min"), "hi": _get(cand, "candidates_per_row", "max")})
        elif two is not None:
            holds = cand.get("antisymmetry_holds_among_two_candidate_rows")
            out.append({"check": "antisymmetry", "holds": [holds, two]})
        elif inv.get("antisymmetry_holds") is not None and self.two_per_row:  # every row, as recorded
            out.append({"check": "antisymmetry", "holds": [inv["antisymmetry_holds"], n]})
        else:  # neither the rows' candidate scores nor a record that each row had two candidates
            out.append({"check": "antisymmetry", "not_applicable": "no_candidate_scores"})
        if _get(cand, "sum_to_zero_holds") is not None:
            for check, key in (("sum", "sum_to_zero_holds"), ("best", "chosen_is_best_and_rejected_is_worst")):
                if check == "best" and rule:
                    out.append({"check": check, "not_applicable": "selection", "rule": rule})
                elif cand.get(key) is not None:
                    out.append({"check": check, "holds": [cand[key], cand.get("rows", n)]})
        else:
            out.append({"check": "sum", "not_applicable": "no_candidate_scores"})
        return out + inversions

    @property
    def agreement(self) -> dict[str, Any] | None:
        """metrics.json's `agreement` between scorers (present with several)."""
        block = (self.metrics or {}).get("agreement")
        return block if block and block.get("pairs") else None

    @property
    def scale(self) -> dict[str, Any] | None:
        """What the analysis read of the scores' scale: {kind (rating, logit, probability, constant, unclear), ...}."""
        return (self.metrics or {}).get("scale")

    @property
    def scale_read_as_pairrm(self) -> bool | None:
        """Whose logits the analysis read the scores as (PairRM's, a reward model's, None: PairRM's, no record naming
        the scorer), from the scorer its metrics record, else the one known_recipe names, as 02_analyze reads them."""
        return read_as_pairrm(_get(self.metrics, "scorer"), self.known_recipe.get("scorer"),
                              bool(self.sign_order_fails))

    @property
    def sign_order_fails(self) -> int:
        """Rows breaking PairRM's sign order where the analysis expected it to hold, else 0."""
        invariants = _get(self.metrics, "invariants") or {}
        expected = invariants.get("expected_to_hold") and not invariants.get("selection")
        return invariants.get("sign_order_fails") or 0 if expected else 0

    @property
    def pairrm_scores(self) -> bool:
        """The scores are known to be PairRM's (or a stand-in's of its architecture): built here by its kind of scorer,
        or so its record (`repro score`'s, `read_as_pairrm`) or the recipe says, and neither a rating scale nor, of the
        recipe's, a row breaking its sign order (they never do) says not."""
        if self.built_here:
            return self.scorer.get("kind", "pairrm") == "pairrm"
        told = read_as_pairrm(self.scorer if "kind" in self.scorer else None, self.known_recipe.get("scorer"),
                              bool(self.sign_order_fails))
        return bool(told) and (self.scale or {}).get("kind") not in ("rating", "probability")

    @property
    def two_per_row(self) -> bool:
        """Every row ranked two candidates, as the candidates stage records."""
        return set(_get(self.stages, "candidates", "candidates_per_row") or ()) == {"2"}

    @property
    def margins_by_construction(self) -> str | None:
        """Built here, chosen the higher-scored of its pair by every rule (selection.select), so no margin is below 0:
        of what chosen is the best, `two` (the row's two candidates), `highest` (the row's candidates: the rules that
        take the best) or `picked` (the two the rule picked; the original pair ranked but never paired, as
        first_scored_only does, may score higher); None where not built here."""
        if not self.built_here:
            return None
        p = self.parameters
        picked = (p.get("selection") in ("random_pair", "best_worst_length_penalised")
                  or p.get("original_pair_position") == "first_scored_only")  # (include_original_pair, validated)
        return "two" if self.two_per_row else "picked" if picked else "highest"

    @property
    def length_rhos(self) -> list[tuple[str, float, float | None]]:
        """(unit, Spearman rho, p-value) of margin vs length difference (`length.margin_vs_length_difference`)."""
        by_unit = _get(self.metrics, "length", "margin_vs_length_difference") or {}
        return [(unit, v["spearman"], v["pvalue"]) for unit, v in by_unit.items() if v["spearman"] is not None]

    @property
    def length_shares(self) -> list[tuple[str, float, float | None, int, int]]:
        """(unit, share of the pairs of unequal lengths where chosen is longer, sign test p-value, those pairs, all)."""
        tests = _get(self.metrics, "length", "chosen_longer_test") or {}
        return [(unit, t["positive"] / n, t["pvalue"], t["positive"], n) for unit, t in tests.items()
                if (n := t["positive"] + t["negative"])]

    @property
    def length_units(self) -> list[str]:
        """The units metrics.json measures lengths in (chars, tokens), in its order."""
        length = _get(self.metrics, "length") or {}
        return list(dict.fromkeys([*(length.get("margin_vs_length_difference") or {}),
                                   *(length.get("chosen_longer_test") or {})]))

    @property
    def length_gaps(self) -> dict[str, str]:
        """{unit: why} of the units whose ρ (or share) is missing where another unit's is given: `same_lengths`
        (chosen and rejected of one length in every pair: neither) or `equal_differences` (one length difference in
        every pair, not 0: no ρ)."""
        tests = _get(self.metrics, "length", "chosen_longer_test") or {}
        rhos, shares = {u for u, *_ in self.length_rhos}, {u for u, *_ in self.length_shares}
        return {unit: "same_lengths" if unit in tests and unit not in shares else "equal_differences"
                for unit in self.length_units
                if rhos and unit not in rhos or shares and unit in tests and unit not in shares}

    @property
    def length_bias(self) -> dict[str, Any]:
        """The verdict: `unmeasured` (no metrics), `absent` (with metrics.json's `length`, whose `cause` says why),
        `few` (rows), `same_lengths`, `none`, `longer`/`shorter` (by the margin's correlation with length),
        `longer_share`/`shorter_share` (by how often chosen is the longer, the correlation not marked), or both marked,
        in opposite directions."""
        if self.metrics is None:
            return {"verdict": "unmeasured"}
        tests = _get(self.metrics, "length", "chosen_longer_test") or {}
        if tests and not any(t["positive"] + t["negative"] for t in tests.values()):
            return {"verdict": "same_lengths"}
        if not self.length_rhos and not self.length_shares:
            return {"verdict": "absent", "length": _get(self.metrics, "length") or {}}
        if (n := _get(self.metrics, "length", "n") or 0) < LENGTH_BIAS_ROWS:
            return {"verdict": "few", "n": n}
        rho = max((rho for _, rho, p in self.length_rhos if abs(rho) >= LENGTH_BIAS_RHO and p is not None
                   and p < LENGTH_BIAS_P), key=abs, default=None)
        share = max((share - 0.5 for _, share, p, *_ in self.length_shares if abs(share - 0.5) >= LENGTH_BIAS_SHARE
                     - 0.5 and p is not None and p < LENGTH_BIAS_P), key=abs, default=None)
        if rho is not None and share is not None and (rho > 0) != (share > 0):
            return {"verdict": "longer_share_shorter_margins" if share > 0 else "shorter_share_longer_margins"}
        if rho is not None:
            return {"verdict": "longer" if rho > 0 else "shorter"}
        return {"verdict": "none" if share is None else "longer_share" if share > 0 else "shorter_share"}

    @property
    def no_preference(self) -> bool:
        """Pairs whose `chosen` the scores do not prefer are a limitation: any inverted one, or ties from MANY_TIES."""
        s = self.pair_signs  # (no pair left by the card's code: the uses say why, not this)
        return bool(s and sum(s.values()) and (s["negative"] or s["zero"] >= MANY_TIES * sum(s.values())))

    @property
    def rounding(self) -> dict[str, Any]:
        """The batching values that decide the float rounding (generation's where it generated), as the run used
        them: a budget left to the device's default by the one the scorer records, one an out-of-memory lowered by
        the one it scored at (none where it scored at several: `lowered_budgets`, or some prompts' is not known:
        `scorer_budgets`). A byte-identical rebuild needs them, though the parameters table leaves out how the work
        ran."""
        budgets = list(lowered_budgets(self.scorer))
        batch_tokens = (budgets[0] if len(budgets) == 1 else None) if budgets \
            else self.parameters.get("batch_tokens") or self.scorer.get("batch_tokens")
        used = {**self.parameters, "batch_tokens": None if unknown_budget(self.scorer) else batch_tokens}
        fields = _fields(self.parameters)
        return {k: used[k] for k in ROUNDING if k in fields and used.get(k) is not None}

    @property
    def rebuild_from(self) -> dict[str, Any]:
        """The rows rebuilt afresh from a clone of repro: {file: the params file shipped with repro whose rows differ
        least from these (`closest_params_file`), where `--set` gives fewer values than a saved file would and none a
        local path or a chat template, else None; yaml: else the shaping parameters other than the defaults (`source`
        always), to save as REBUILD_FILE, a chat template as TO_FILL (the card names it by its hash); local: the local
        files and folders these name (by last name); fill: TO_FILL where the reader puts a template; command}."""
        shaping = shaping_parameters(self.parameters)
        defaults = {k: f.get_default(call_default_factory=True) for k, f in _fields(self.parameters).items()}
        own = [k for k in shaping if k == "source" or shaping[k] != public_value(defaults.get(k))]
        file, differ = closest_params_file(shaping, self.parameters.get("run_name"))
        local, templates = self.named_in(own)  # (a local file is compared by its last name: never a shipped file's)
        if file and len(differ) < len(own) and not local and not self.named_in(differ)[1]:
            templates = []
        else:
            file, differ = None, {}
        sets = " ".join(set_option(k, v) for k, v in {"cache": False, **differ, **self.rounding}.items())
        text = None if file else yaml.safe_dump({k: shaping[k] for k in own}, allow_unicode=True).strip()
        for template in templates:
            text = text.replace(public_value({"chat_template": template})["chat_template"], f"{TO_FILL}  # the chat "
                                f"template given, sha256 {hashlib.sha256(template.encode()).hexdigest()}")
        return {"file": file, "yaml": text, "local": local, "fill": TO_FILL if templates else "",
                "command": f"repro run {file or REBUILD_FILE} --out {REBUILD_OUT} {sets}"}

    def named_in(self, keys: Iterable[str]) -> tuple[list[str], list[str]]:
        """The local files and folders these parameters name (by last name), and the chat templates they give."""
        given = {where: v for k in keys for where, v in strings_in(self.parameters[k], k).items()}
        templates = sorted({v for where, v in given.items() if where.endswith(".chat_template")})
        return sorted({public_value(v) for v in given.values() if public_value(v) != v} - set(templates)), templates

    @property
    def named_scorers(self) -> list[tuple[str | None, dict[str, Any]]]:
        """(None, the primary scorer's record), then (name, record) of each further scorer (`scorers:`)."""
        return [(None, self.scorer), *((s.get("name"), s) for s in self.scorers if not s.get("decides_pairs"))]

    @property
    def scorer_budgets(self) -> list[dict[str, Any]]:
        """[{name, batch_tokens, lowered, unknown}] of each scorer (`named_scorers`) whose budget an out-of-memory
        lowered (`lowered_budgets`) or some prompts' is not known: resumed from chunks an older repro made, which do
        not record it."""
        out = [{"name": name, "batch_tokens": s.get("batch_tokens"), "lowered": lowered_budgets(s),
                "unknown": unknown_budget(s)} for name, s in self.named_scorers]
        return [b for b in out if b["lowered"] or b["unknown"]]

    @property
    def from_cache(self) -> list[dict[str, Any]]:
        """[{what: `scored` (by `name`, None: the primary) / `generated`, k: rows the row cache gave (an interrupted
        call whose chunks were resumed included), n: rows of the stage, unknown: rows resumed whose note does not say}]
        where it gave any or some are not known: earlier runs made them in chunks of their own (the cache's key holds
        no chunk), so the rebuild values do not decide them."""
        stages = [*(("scored", name, s, "prompts") for name, s in self.named_scorers),
                  ("generated", None, self.generation, "prompts_generated")]
        return [{"what": what, "name": name, "k": cached[0], "n": record.get(rows), "unknown": cached[1]}
                for what, name, record, rows in stages if any(cached := _cached(record))]

    @property
    def made_beside_cache(self) -> bool:
        """A stage the row cache served made rows here beside them (not known of one whose rows are not counted)."""
        return any(c["n"] is not None and c["k"] != c["n"] for c in self.from_cache if c["k"])

    @property
    def source_sha256(self) -> str | None:
        """The source file's sha256, as the load stage records it (a file over 64 MiB: its size and time, none)."""
        digest = ((self.stages.get("load") or {}).get("content") or {}).get("file")
        return digest if isinstance(digest, str) and len(digest) == 64 and digest.isalnum() else None

    def _repr_markdown_(self) -> str:
        splits = ", ".join(f"`{s.name}` {s.num_examples} rows" for s in self.splits)
        made = "built by this run" if self.built_here else f"not built here ({one_line(self.card_dataset)})"
        left = ", ".join(s for s, _ in self.left_out) or "none"
        return (f"**{one_line(self.title)}**: {splits}; {made}; scorer stand-in: {self.stand_in}; "
                f"metrics: {'yes' if self.metrics else 'no'}; figures: {len(self.figures)}; left out: {left}")


def folder_title(run: RunDir, dataset: str | None) -> str:
    """A card's title without pretty_name nor hub_repo_id: its run folder's name; for the run of `dataset` (its
    card_dataset or recorded subject) an older repro named without its letters outside ASCII (runs/donn-es for
    données.jsonl), the dataset's name now."""
    name = run.root.resolve().name
    if dataset and name == dataset_run_name(dataset, ascii_folder_safe) != dataset_run_name(dataset):
        return dataset_run_name(dataset)
    return name


def gather_facts(params: "CardParams") -> CardFacts:
    """Read the data, manifest, metrics and figures of a run (copying in a foreign `card_dataset` first)."""
    run = RunDir(params.run_root)
    card_dataset = None if is_own_dataset(run, params.card_dataset) else params.card_dataset
    # read before anything is written: a missing or unreadable card_dataset writes nothing (not even the folder)
    foreign = None if card_dataset is None else load_source(card_dataset, params.card_split, "card_dataset",
                                                            "card_split")
    if foreign is not None and detect_format(foreign.features) == "seed" and not any(
            set(pair) <= set(foreign.column_names) for pair in (("chosen", "rejected"), SCORE_COLUMNS)):
        raise DataError(f"card_dataset {card_dataset!r} has no `chosen` and `rejected` columns, nor their scores (it "
                        f"has {', '.join(foreign.column_names)}): 03_card describes preference pairs, in the seed's "
                        f"columns or SPPO's, Snorkel's, RLHFlow's or SELM's. Give the pairs, or rank these rows into "
                        f"pairs with 01_construct (source, candidate_columns); nothing was written.")
    if foreign is not None:  # scores of another type than numbers would be published as such (a Json column)
        scored = [c for c in SCORE_COLUMNS if c in foreign.column_names]
        table = foreign.select_columns(scored).with_format("arrow")[:] if scored else None
        for column in scored:
            score_array(table, column, f"card_dataset {card_dataset!r}", "card_dataset")
    refuse_unbuilt(run, params.card_dataset)
    if foreign is None:  # (a missing dataset writes nothing, nor holds the folder; nor a split it lacks)
        _split_files(run.dataset)
        dataset_or_own(None, params.card_split, run, "card_dataset", "card", "card_split")
    claim(run, params.card_dataset, "card_dataset")
    manifest = Manifest(run).read()
    built_here = card_dataset is None and bool(manifest.get("counts") or manifest.get("scorer"))
    if foreign is not None:  # (claim refused a run directory that describes another dataset)
        Manifest(run).add_outputs(*write_split(foreign, run.dataset, params.card_split)["files"])
    if built_here and params.known_recipe:
        raise ParameterError(
            "known_recipe is for datasets this project did not build, but this run's manifest already records how "
            "its dataset was made; remove known_recipe (or set card_dataset to the other dataset).")
    # the split described: the one 01_construct wrote; of a dataset not built here, the one 02_analyze read (once
    # 03_card has added it), else card_split
    mains = [] if built_here else [_get(read_record(run.metrics, CARD_METRICS, METRICS_FIX), "dataset", "split"),
                                    params.card_split]
    features, splits, ds = _read_splits(run.dataset, (manifest.get("dataset") or {}).get("split"), *mains)
    title = public_text(params.pretty_name or "") or (
        params.hub_repo_id.split("/")[-1] if params.hub_repo_id
        else folder_title(run, params.card_dataset or (manifest.get("subject") or {}).get("dataset")))
    facts = CardFacts(
        run=run, title=title, features=features, splits=splits, built_here=built_here, license=params.license,
        language=list(params.language or (BUILT_LANGUAGE if built_here else [])), hub_repo_id=params.hub_repo_id,
        card_dataset=card_dataset if card_dataset is not None else (None if built_here else str(run.dataset)),
        parameters_given=params.model_dump(), environment=dict(manifest.get("environment") or {}))
    if built_here:
        facts.parameters = effective_parameters(manifest.get("parameters") or {})
        for name in ("counts", "scorer", "generation", "stages"):
            setattr(facts, name, dict(manifest.get(name) or {}))
        # MIT where the texts are UltraFeedback's or the demo's (or a stand-in policy's); a policy's are its outputs
        mine = facts.source_kind != "other" and (not facts.generation or facts.generation.get("stand_in"))
        facts.license = facts.license or (BUILT_LICENSE if mine else None)
        facts.scorers = list(manifest.get("scorers") or [])
        facts.selfcheck = manifest.get("selfcheck") or None
        if facts.selfcheck and "scoring_code" in facts.selfcheck:  # with the code that scored the rows as recorded now
            facts.selfcheck["same_code_as_run"] = same_scoring_code(  # (an older repro's record: as it was recorded)
                facts.selfcheck["scoring_code"], (facts.stages.get("score") or {}).get("code"))
        facts.test_split = manifest.get("test_split") or None
        kept = facts.counts.get("kept")
        if kept is not None and kept != facts.num_examples:
            raise DataError(
                f"The manifest of {run.root} says {kept} rows were kept, but {run.dataset} holds "
                f"{facts.num_examples}; the data changed after construction. Re-run notebooks/01_construct.ipynb.")
    elif isinstance(params.known_recipe, dict):
        facts.known_recipe = {fact: public_text(str(told)) for fact, told in params.known_recipe.items()}
    elif params.known_recipe:
        facts.recipe_note = public_text(params.known_recipe)
    if card_dataset is not None:
        facts.other_splits = held_splits(card_dataset, [split.name for split in splits])
    if not built_here:  # the stand-ins its own card, folder or the run that built it declare, the scorer `repro score`
        # recorded beside it: said as built here
        facts.scorer = declared_scorer(facts.card_dataset, params.card_split) or {}
        facts.generation = declared_stand_ins(facts.card_dataset, params.card_split).get("generation", {})
        told = facts.known_recipe.get("scorer", "").strip()
        if told.startswith("builtin:") and not facts.scorer:  # a stand-in by its name: said as one, as declared there
            kind = "pairrm" if BUILTIN_SCORERS.get(told) == "pairrm" else "sequence_classifier"
            facts.scorer = {"stand_in": True, "declared": "known_recipe",
                            **({"model": told, "kind": kind} if told in BUILTIN_SCORERS else {})}
    facts.empty_columns = [c for c in ds.column_names if len(ds) and ds.data.column(c).null_count == len(ds)]
    view = seed_view(ds, candidates=False).with_format("arrow")[:]  # (a recipe's scores as the seed's columns)
    kept = _usable_rows(facts, ds, view)
    facts.metrics = _read_metrics(run, facts, view)
    analysis = (manifest.get("notebooks") or {}).get("02_analyze") or {}
    if facts.metrics is None and analysis.get("status") == "failed" and analysis.get("error"):
        # the error itself, as the stage records it (not where the notebook failed: cell numbers mean nothing there)
        stage = (manifest.get("stages") or {}).get("analyze") or {}
        error = stage.get("error") if stage.get("status") == "failed" else None
        facts.analysis_error = public_text((error or analysis["error"]).splitlines()[0])  # (then: where it is saved)
    failed = "analysis_failed" if facts.analysis_error else None
    if facts.metrics is None:  # (SELM's rows, and other rows without scores, have nothing for 02_analyze to read)
        facts.left_out.append(("characteristics", (failed or "no_metrics") if facts.scored else "no_scores"))
    facts.figures = _figures(run, facts.metrics)
    if not facts.figures:
        facts.left_out.append(("figures", (failed or "no_figures") if facts.scored else "no_scores"))
    facts.comparison = read_record(run.compare, CARD_COMPARE, COMPARE_FIX)
    if "prompt" in ds.column_names and "prompt_id" in ds.column_names:
        prompts = view.column("prompt").to_pylist()  # the text (TRL's conversational prompt: its user turn's)
        facts.prompt_id_sha256_rows = sum(isinstance(p, str) and prompt_id_of(p) == i
                                          for p, i in zip(prompts, column_values(view.column("prompt_id"))))
    # ids compared by their value, whatever their type (a Json column's: its JSON text); none usable: the prompts
    key = next((c for c in ("prompt_id", "prompt") if c in ds.column_names and ds.data.column(c).null_count < len(ds)
                and not pa.types.is_nested(ds.data.column(c).type)), None)
    counts = Counter(ds.data.column(key).to_pylist() if key else ())
    if repeated := [k for value, k in counts.items() if k > 1 and value is not None]:
        facts.repeated_prompts = {"column": key, "rows": sum(repeated), "values": len(repeated)}
    for c in ds.column_names:
        if c in ("chosen", "rejected") or c.startswith("generate_"):
            facts.turns[c], facts.other_turns[c] = _roles(ds.data.column(c))
    if facts.trl_ready:  # the rows the card's code gives to_trl, checked and numbered as to_trl does (scores first:
        # a recipe's row without a pair, a given margin, which the card's filter of the seed's columns does not see)
        pairs = view.select(["prompt", "chosen", "rejected", *(c for c in SCORE_COLUMNS if c in view.column_names)])
        if (given := given_margins(ds)) is not None:
            pairs = pairs.append_column(GIVEN_MARGIN, pa.array(given))
        rows = (r for batch in pairs.filter(pa.array(kept)).to_batches(1000) for r in batch.to_pylist())
        if refused := [(i, *why[:2]) for i, r in enumerate(rows) if (why := refused_scores(r) or refused_turns(r))]:
            facts.trl_refused = dict(zip(("first", "shape", "column"), refused[0]), rows=len(refused))
    return facts


def _roles(column: pa.ChunkedArray) -> tuple[list[str] | None, int]:
    """(the roles of a conversation column's turns as most rows with any turns have them, []: no row has any, or the
    column holds no turns, None: a column of text; the rows whose turns differ from those)."""
    if column.type in TEXT_TYPES:
        return None, 0
    if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type) or not (
            pa.types.is_struct(column.type.value_type) and column.type.value_type.get_field_index("role") >= 0):
        return [], 0
    arr = column.combine_chunks()
    shapes = Counter(map(tuple, type(arr).from_arrays(arr.offsets, arr.values.field("role")).to_pylist()))
    shapes.pop((), None)  # (rows without turns)
    roles, most = shapes.most_common(1)[0] if shapes else ((), 0)
    return list(roles), len(arr) - arr.null_count - most if shapes else 0


def _split_files(dataset_dir: Path) -> dict[str, list[Path]]:
    """The dataset's parquet files by split; none is an error saying what to do."""
    if not (files := split_files(dataset_dir)):
        raise DataError(
            f"No dataset at {dataset_dir}: expected {DATA_DIR}/<split>-00000-of-00001.parquet there. Run "
            f"notebooks/01_construct.ipynb for this run first, or set card_dataset to the dataset to describe.")
    return files


def _read_splits(dataset_dir: Path, *mains: str | None) -> tuple[Features, list[SplitFacts], datasets.Dataset]:
    """Each split's facts, the main split (the first of `mains` there is, else the first by name) first, and the main
    split's rows."""
    files = _split_files(dataset_dir)
    main = next((split for split in mains if split in files), next(iter(files)))
    features, splits, first = None, [], None
    for split, paths in files.items():
        # loaded through the datasets builder (Arrow cache), as a user loads data before push_to_hub:
        # its _estimate_nbytes() is the num_bytes push_to_hub records (a bare pyarrow read differs slightly)
        ds = read_parquet([str(p) for p in paths])
        if features is not None and ds.features != features:
            raise DataError(f"Split {split!r} in {dataset_dir} has features {ds.features}, other splits have "
                            f"{features}; one card (one config) needs the same features in every split.")
        features, first = ds.features, ds if split == main else first
        splits.append(SplitFacts(name=split, num_bytes=ds._estimate_nbytes(), num_examples=len(ds),
                                 download_size=sum(p.stat().st_size for p in paths),
                                 files=[str(p.relative_to(dataset_dir)) for p in paths]))
    return features, sorted(splits, key=lambda s: s.name != main), first


def _figures(run: RunDir, metrics: dict[str, Any] | None) -> list[tuple[Path, str]]:
    """(PNG, caption) of the run's figures: in metrics.json's order with its titles, else every PNG by name; only those
    in its figures/ (a copied run's metrics.json may name any file: one elsewhere is said, never published)."""
    listed = (metrics or {}).get("figures")
    out = []
    for name, f in listed.items() if listed else ():
        if f.get("png") and (png := run.root / f["png"]).is_file():
            if within(png, run.figures):
                out.append((png, f.get("title") or name))
            else:
                notice(f"metrics.json's figure {name} ({f['png']}) is not in {run.figures}: the card neither copies "
                       f"nor shows it.")
    return out or [(png, png.stem.replace("_", " ")) for png in sorted(run.figures.glob("*.png"))  # none if no folder
                   if within(png, run.figures)]


def public_value(value: Any) -> Any:
    """A value as the published card may show it: a local path by its last name, a chat template by its hash."""
    if isinstance(value, (list, tuple)):
        return type(value)(public_value(v) for v in value)
    if isinstance(value, dict):  # e.g. one entry of `scorers`
        return {k: (f"(given, sha256 {hashlib.sha256(str(v).encode()).hexdigest()[:12]})" if k == "chat_template"
                    else public_value(v)) for k, v in value.items()}
    if not isinstance(value, str) or reads_as_hub_id(value) or "\n" in value:
        return value
    return public_name(value)


def lowered_budgets(scorer: dict[str, Any]) -> dict[int, int]:
    """{batch_tokens: prompts scored at it}, highest first, where an out-of-memory lowered the budget the scorer
    started at (recorded only then, or where some prompts' is not known); {} where every known one is that one."""
    used = scorer.get("batch_tokens_used") or {}
    if {int(b) for b in used} <= {scorer.get("batch_tokens")}:
        return {}
    return dict(sorted(((int(b), n) for b, n in used.items()), reverse=True))


def unknown_budget(scorer: dict[str, Any]) -> int:
    """Prompts whose budget is not known: resumed from chunks an older repro made, which keep none (the prompts not in
    `batch_tokens_used`, which a repro records wherever it resumed); of a record such a repro wrote (it recorded only
    its own call's budgets), the prompts it resumed: neither computed nor from the row cache (counted apart)."""
    if not scorer.get("chunks_resumed") or scorer.get("backend") == "llm-blender":  # (llm-blender's: no budget)
        return scorer.get("batch_tokens_unknown", 0)
    used = scorer.get("batch_tokens_used")
    known = sum(used.values()) if used is not None else scorer.get("prompts_computed", 0) + \
        scorer.get("cache", {}).get("rows_from_cache", 0)
    return max(0, scorer.get("prompts", 0) - known)


def _cached(record: dict[str, Any]) -> tuple[int, int]:
    """(rows the row cache gave a stage, this call's and a resumed interrupted call's; rows resumed whose note does
    not say: an older repro's chunks)."""
    cache = record.get("cache", {})
    return cache.get("rows_from_cache", 0) + cache.get("resumed_from_cache", 0), cache.get("resumed_unknown", 0)


def _fields(parameters: dict[str, Any]) -> dict[str, Any]:
    """The construction parameters' fields, and the generation ones when the run generated."""
    unused = unused_generation(parameters)
    return {k: f for schema in (ConstructParams, GenerationParams) for k, f in schema.model_fields.items()
            if k not in unused}


def shaping_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """The parameters that shaped the dataset: construction ones, generation ones only when it generated, none its
    values left idle (`idle_parameters`)."""
    fields = _fields(parameters).keys() - NOT_SHAPING - idle_parameters(parameters).keys()
    return {k: public_value(v) for k, v in parameters.items() if k in fields}


def closest_params_file(shaping: dict[str, Any], run_name: Any) -> tuple[str | None, dict[str, Any]]:
    """params/… of the params file shipped with repro (not a family's) whose rows differ from those of these shaping
    parameters (`shaping_parameters`) in the fewest values, the one of this run name first (each names its runs
    after itself), and those values of these; (None, {}) where none builds rows."""
    folder, found = shipped("params"), []
    for path in committed(sorted(folder.glob("**/*.yaml"))):  # (one of this checkout's own: a clone has it not)
        included, own = read_params_yaml(path)
        values = {**included, **own}
        if "family" not in values and "01_construct" in (resolved := resolve_parameters(values))["notebooks"]:
            theirs = shaping_parameters(resolved)
            differ = {k: v for k, v in shaping.items() if theirs.get(k) != v}
            found.append((len(differ), path.stem != run_name, f"params/{path.relative_to(folder).as_posix()}", differ))
    return min(found, default=(0, 0, None, {}))[2:]


def effective_parameters(recorded: dict[str, Any]) -> dict[str, Any]:
    """The run's parameters with construction defaults filled in (a params file names only what it changes)."""
    defaults = {k: f.default for k, f in _fields(recorded).items() if k not in NAMING}
    return {**defaults, **recorded}


def _usable_rows(facts: CardFacts, ds: datasets.Dataset, view: pa.Table) -> np.ndarray:
    """What the card's code leaves out before `to_trl` (rows without finite scores, then those with an empty chosen
    response: it refuses both) and the signs of the margins it keeps (`view`: the main split in the seed's columns);
    the rows it keeps."""
    # a conversation's last assistant turn, or a text (RLHFlow's pairs), read in Arrow as 02_analyze reads them
    texts = response_texts(ds.data.column("chosen")) if "chosen" in ds.column_names else None
    empty = np.zeros(len(ds), bool) if texts is None else pc.fill_null(
        pc.equal(pc.utf8_trim_whitespace(texts), ""), False).to_numpy(zero_copy_only=False)
    kept = np.ones(len(ds), bool)
    if facts.scored:
        chosen, rejected = (score_array(view, c, str(facts.run.dataset), "card_dataset") for c in SCORE_COLUMNS)
        finite = np.isfinite(chosen) & np.isfinite(rejected)
        if facts.has_columns(*SCORE_COLUMNS):  # (the card's code reads them by the seed's column names)
            facts.nonfinite_scores, empty, kept = int((~finite).sum()), empty & finite, finite
        same = same_responses(ds.data)[finite & ~empty]
        margin = (chosen - rejected)[finite & ~empty][~same]
        facts.pair_signs = {"positive": int((margin > 0).sum()), "zero": int((margin == 0).sum()),
                            "negative": int((margin < 0).sum()), "same": int(same.sum())}
    facts.empty_chosen = int(empty.sum())
    return kept & ~empty


def _read_metrics(run: RunDir, facts: CardFacts, view: pa.Table) -> dict[str, Any] | None:
    """metrics.json, when it describes the rows of `view` (the main split, seed columns): as many, the same scores."""
    if (metrics := read_record(run.metrics, CARD_METRICS, METRICS_FIX)) is None:
        return None
    n, excluded = metrics.get("n"), metrics.get("n_excluded", 0)
    recorded = _get(metrics, "dataset", "scores_sha256")
    counted = isinstance(n, int) and n + excluded != facts.num_examples  # other rows than the dataset's
    changed = bool(recorded) and recorded != scores_digest(view)
    analysed, described = _get(metrics, "dataset", "split"), facts.splits[0].name
    if (counted or changed) and isinstance(analysed, str) and analysed != described:  # (a file's: any split name)
        fix = (f"(the one 01_construct wrote): run notebooks/02_analyze.ipynb on this run with dataset_split "
               f"{described!r} to describe it again." if facts.built_here else
               f"(03_card's card_split): run notebooks/02_analyze.ipynb on this run with dataset_split {described!r} "
               f"to describe the card's split again, or notebooks/03_card.ipynb with card_split {analysed!r} to add "
               f"the split analysed to the card, which then describes it.")
        raise DataError(f"{run.metrics} describes split {analysed!r} (02_analyze's dataset_split), but the card "
                        f"describes split {described!r} {fix}")
    if counted:
        raise DataError(
            f"{run.metrics} describes {n} rows (+{excluded} excluded) but the dataset has "
            f"{facts.num_examples}: the metrics belong to other data. Re-run notebooks/02_analyze.ipynb on this run.")
    if changed:
        raise DataError(
            f"{run.metrics} describes other scores than {run.dataset} holds: the data changed after "
            f"notebooks/02_analyze.ipynb ran. Re-run it on this run, then this notebook.")
    return metrics


def _get(tree: Any, *keys: str) -> Any:
    for key in keys:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree

