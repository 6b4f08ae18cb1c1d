"""Families of runs (docs/families.md): a grid over parameters expanded into members, each a run directory
`runs/<family>/<member>/` whose manifest records `family`; one complete with the same fingerprint is not run again."""

from __future__ import annotations

import contextlib
import itertools
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import TypeAdapter

from .errors import ParameterError, ReproError, did_you_mean
from .jobs import fingerprint_of
from .manifest import NOT_SHAPING, Manifest
from .parameters import (ACTS_ONLY_WITH, NOTEBOOK_SECTIONS, SCHEMAS, all_fields, notebook_fields, once,
                         read_value, idle_parameters, resolve_parameters, unused_generation, validate_all)
from .paths import FAMILY_JSON, FAMILY_LOGS, RunDir, ascii_folder_safe, folder_safe, run_folder
from .records import holds
from .revisions import run_fingerprint, shaping

SPEC_KEYS = {"name", "grid", "member_name", "jobs"}
# parameters a grid cannot vary: where a member goes is the family's to decide, and the notebooks are the same
NOT_IN_GRID = {"run_name", "run_dir", "notebooks", "family", "selfcheck", "include"}
GRID_ADVICE = ("\nFix the value in the family's grid (family.grid in the params file, or --grid), else "
               "with --set KEY=VALUE.")
# the parameters whose value is a mapping (known_recipe, scorer_options): a family's grid gives them its mappings whole
MAPPING_FIELDS = {name for schema in SCHEMAS.values() for name, field in schema.model_fields.items()
                  if holds(TypeAdapter(field.annotation), {})}
# names a member's folder cannot have: the family's folder itself, the one above it, what the family writes there
NOT_MEMBER_NAMES = {"", ".", "..", FAMILY_JSON, FAMILY_LOGS} | {
    path.name for path in vars(RunDir("family")).values() if isinstance(path, Path) and path.parent.name == "family"}


class FamilyError(ReproError):
    """A family cannot run as declared (bad grid, unknown member, failed members)."""


@dataclass(frozen=True)
class Member:
    """One run of a family: its name, the grid's values for it, its whole parameters, folder and fingerprint."""

    index: int
    name: str
    grid_values: dict[str, Any]  # the grid key -> this member's value (a mapping for a bundle key)
    values: dict[str, Any]  # the params file's values with the member's applied (what `repro run` validates)
    run_dir: Path
    fingerprint: dict[str, Any]
    resolved: dict[str, Any]  # `values` resolved (`resolve_parameters`): what `fingerprint` hashes, once
    name_now: str | None = None  # its name now, where it keeps the folder an older repro named (`older_named`)

    def record(self, family: str) -> dict[str, Any]:
        """What the member's manifest records under `family`."""
        return {"name": family, "member": self.name, "index": self.index, "grid": self.grid_values}


@dataclass
class Family:
    name: str
    root: Path
    members: list[Member] = field(default_factory=list)
    jobs: int = 1
    given_as: str = "--out"  # how its folder was given (--out, or run_dir): what a refusal says to change
    busy: dict[str, str] = field(default_factory=dict)  # member -> the other command writing there at the checks

    @property
    def plan(self) -> dict[str, dict[str, Any]]:
        """Each member's name -> its grid values, in order (what the family folder's manifest records as `members`)."""
        return {m.name: m.grid_values for m in self.members}

    def member(self, name: str) -> Member:
        """The member called `name`, or at that index from 0 (a Slurm array task id); else an error listing them."""
        if found := next((m for m in self.members if name in (m.name, m.name_now)), None):
            return found
        if name.isdigit() and int(name) < len(self.members):
            return self.members[int(name)]
        raise FamilyError(f"--member {name!r} is not a member of family {self.name!r}; its members are "
                          f"{', '.join(m.name for m in self.members)} (or their index, 0 to {len(self.members) - 1}).")


def parse_grid_args(items: list[str]) -> dict[str, list[Any]]:
    """`--grid KEY=V1,V2,...` items as a grid (each value read as --set reads one: `--grid mini_index=0,1,2,3`)."""
    grid: dict[str, list[Any]] = {}
    given: dict[str, str] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--grid expects KEY=VALUE1,VALUE2,..., got {item!r}; for example "
                                 f"--grid mini_index=0,1,2,3")
        once(given, key.strip(), f"--grid {item}", "give its values in one --grid")
        try:  # each value read as --set reads one (text YAML would change is taken as typed)
            text = f"[{raw}]"
            grid[key.strip()] = [read_value(text[v.start_mark.index:v.end_mark.index])
                                 for v in yaml.compose(text, Loader=yaml.SafeLoader).value]
        except yaml.YAMLError as exc:
            if not re.search(r"(^|\s)#", raw):  # (a ' #' reads as a comment that swallows the list's end)
                raise ParameterError(f"--grid {item}: the values are not a YAML list ({exc}).") from None
            # (split at the commas outside quotes: 'PairRM, best vs worst' is one value)
            grid[key.strip()] = [read_value(v) for v in re.findall(r"""(?:'[^']*'|"[^"]*"|[^,'"])+""", raw)]
    return grid


def check_grid(grid: Any, where: str) -> dict[str, list[Any]]:
    """The grid if every key is a parameter (or a bundle of parameters) with a non-empty list of values."""
    if not isinstance(grid, dict) or not grid:
        raise ParameterError(f"family.grid in {where} must map parameters to lists of values, e.g. "
                             f"grid: {{mini_index: [0, 1, 2, 3]}}; got {grid!r}.")
    known, unknown, inside = all_fields(), [], []  # (every one named at once: grid keys, keys inside bundles)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ParameterError(f"family.grid.{key} in {where} must be a non-empty list of values, got {values!r}: "
                                 f"a family needs at least one value per key.")
        # two members of one run (a bundle's `name` only names the folder)
        bare = [settings_of(key, v) if is_bundle(key, v) else v for v in values]
        if (twice := next((k for k, v in enumerate(bare) if v in bare[:k]), None)) is not None:
            raise ParameterError(f"family.grid.{key} in {where} lists {bare[twice]!r} twice"
                                 f"{' (their names aside)' * (bare[twice] != values[twice])}: give each value once.")
        if key in NOT_IN_GRID:
            why = ("a params file's includes are read once, before the grid: vary the parameters they set" if
                   key == "include" else "members go to runs/<family>/<member>/ and run the same notebooks")
            raise ParameterError(f"family.grid.{key} in {where}: {key} cannot vary within a family ({why}); remove it "
                                 f"from the grid.")
        if key not in known and not all(isinstance(v, dict) for v in values):
            unknown.append(f"family.grid.{key} in {where}: {key!r} is not a parameter."
                           f"{did_you_mean(key, sorted(known))}")
            continue
        if key in MAPPING_FIELDS and (named := next((v for v in values if isinstance(v, dict) and "name" in v), None)):
            raise ParameterError(f"family.grid.{key} in {where}: {named!r} holds 'name': a mapping there is the value "
                                 f"of {key}, not a bundle (members are named by a hash of it, or by "
                                 f"family.member_name). To name them, give bundles under a key of your own, e.g. "
                                 f"opts: [{{name: {named['name']}, {key}: {{...}}}}, ...].")
        inside += [f"family.grid.{key} in {where}: {k!r} in {value!r} is not a parameter a member can set."
                   f"{did_you_mean(k, sorted(known - NOT_IN_GRID | {'name'})) if k not in known else ''}"
                   for value in values if is_bundle(key, value)
                   for k in value if k != "name" and (k not in known or k in NOT_IN_GRID)]
    if unknown or inside:
        raise ParameterError(" ".join([*unknown, *inside]) + (
            " A grid key is a parameter, or a name of your own whose values are mappings of parameters set together "
            "(e.g. part: [{part_start: 0, part_stop: 20000}, ...])." if unknown else ""))
    return grid


def _label(value: Any, safe: Callable[[str], str]) -> str:
    """A value as a folder name may show it (as `safe` keeps its letters)."""
    if isinstance(value, (list, dict)):
        return "h" + fingerprint_of(value)[:8]
    text = Path(value).name if isinstance(value, str) and "/" in value and Path(value).exists() else str(value)
    return safe(text).strip("-") or "empty"


def member_names(combos: list[dict[str, tuple[int, Any]]], template: str | None, where: str,
                 safe: Callable[[str], str] = folder_safe) -> list[str]:
    """Each member's folder name: `template` filled with the values (a bundle by its `name`), or key-value pairs;
    `combos`: grid key -> (position in its list, value); `safe` keeps the letters (ascii_folder_safe: older names)."""
    names = []
    for combo in combos:
        labels = {key: _label(value.get("name", f"{key}{i}") if is_bundle(key, value) else value, safe)
                  for key, (i, value) in combo.items()}
        if template:
            try:
                name = safe(template.format(**labels))
            except (KeyError, IndexError, ValueError) as exc:
                raise ParameterError(f"family.member_name {template!r} in {where} cannot be filled ({exc!r}); it may "
                                     f"name the grid keys {sorted(combo)} in braces.") from None
        else:
            name = "__".join(labels[k] if is_bundle(k, v) else f"{k}-{labels[k]}" for k, (_, v) in combo.items())
        names.append(name)
    for i, name in enumerate(names if safe is folder_safe else ()):
        if name in NOT_MEMBER_NAMES:
            given = f"family.member_name {template!r}" if template else "a bundle's name"
            raise ParameterError(
                f"{given} in {where} names a member {name!r} ({ {k: v for k, (_, v) in combos[i].items()} }): a "
                f"member's run goes into a folder of its own in the family's folder, "
                + ("not into that folder or the one above it" if name in ("", ".", "..") else
                   f"and {name} is a name a run directory keeps for its own files (the family's folder is one, "
                   f"05_family's)") + ". Give it another name.")
        if name in names[:i]:
            a, b = ({k: v for k, (_, v) in combos[j].items()} for j in (names.index(name), i))
            raise ParameterError(
                f"Two members of the family in {where} are both named {name!r} ({a} and {b}): "
                f"every member needs its own folder. Give family.member_name a pattern that tells them apart, "
                f"e.g. one naming every grid key.")
    return names


def holds_member(folder: Path, family: str, grid: dict[str, Any]) -> bool:
    """Whether the record of run directory `folder` says it holds family `family`'s member of grid values `grid`."""
    with contextlib.suppress(OSError, ReproError):
        record = Manifest(folder).read().get("family")
        return isinstance(record, dict) and (record.get("name"), fingerprint_of(record.get("grid"))) == (
            family, fingerprint_of(grid))
    return False


def older_named(root: Path, family: str, grids: list[dict[str, Any]], names: list[str], older: list[str],
                where: str) -> list[str]:
    """`names`, but a name with letters outside ASCII whose folder does not exist, where the name an older repro gave
    that member (`older`: the same member_name, without those letters: Straße's was Stra-e) is a folder holding this
    family's member of the same grid values: that member continues there. Two members in one folder: refused."""
    kept = [old if not name.isascii() and old not in NOT_MEMBER_NAMES and not (root / name).exists()
            and holds_member(root / old, family, grid) else name for name, old, grid in zip(names, older, grids)]
    for i, name in enumerate(kept):
        if name in kept[:i]:
            moved, other = sorted((kept.index(name), i), key=lambda k: kept[k] == names[k])
            pattern = "v_" + "_".join(f"{{{key}}}" for key in grids[moved])
            raise ParameterError(
                f"Two members of the family in {where} would share one folder, {root / name}: it holds the run of "
                f"{grids[moved]} that an older repro named without its letters outside ASCII, and {grids[other]} is "
                f"named {name!r} now. Give family.member_name a pattern of your own that tells them apart (e.g. "
                f"{pattern!r}): {grids[moved]} then runs again in a folder of its letters, and {name} stays as it is.")
    return kept


def is_bundle(key: str, value: Any) -> bool:
    """Whether a value of grid key `key` is a bundle: a mapping, unless `key` takes one (as known_recipe does)."""
    return isinstance(value, dict) and key not in MAPPING_FIELDS


def settings_of(key: str, value: Any) -> dict[str, Any]:
    """The parameters one value of grid key `key` sets: a bundle's (its `name` only names the folder), else its own."""
    return {k: v for k, v in value.items() if k != "name"} if is_bundle(key, value) else {key: value}


def grid_keys(grid: dict[str, Any]) -> set[str]:
    """The parameters a grid sets in its members: its keys, a bundle's in place of its own."""
    return {param for key, values in grid.items() for value in (values if isinstance(values, list) else [values])
            for param in settings_of(key, value)}


def check_members_differ(grid: dict[str, list[Any]], members: list[Member], where: dict[str, str]) -> None:
    """Each parameter the grid sets is set by one key (a bundle's would win over a plain key's unsaid), and no two
    members are one run: alike in every value that shapes their data (`shaping`); `where`: each key's origin."""
    setters: dict[str, str] = {}
    for key, values in grid.items():
        for param in sorted(grid_keys({key: values})):
            if (first := setters.setdefault(param, key)) != key:
                raise ParameterError(f"family.grid in {' and '.join(dict.fromkeys((where[first], where[key])))}: "
                                     f"{param} is set by both grid keys {first} and {key}: each member would take "
                                     f"{key}'s value; set it in one.")
    idle_of = [idle_parameters(m.resolved) for m in members]  # (once a member, not once a key)
    shaped = [{k: v for k, v in shaping(m.resolved).items() if k not in idle} for m, idle in zip(members, idle_of)]
    if (i := next((i for i, one in enumerate(shaped) if one in shaped[:i]), None)) is None:
        return
    a, b = members[shaped.index(shaped[i])], members[i]
    keys = [key for key in grid if a.grid_values[key] != b.grid_values[key]]
    sets = [(settings_of(key, a.grid_values[key]), settings_of(key, b.grid_values[key])) for key in keys]
    params = [p for sa, sb in sets for p in dict.fromkeys([*sa, *sb]) if (p in sa, sa.get(p)) != (p in sb, sb.get(p))]
    readers = {p: " and ".join(nb for nb in NOTEBOOK_SECTIONS if p in notebook_fields(nb)) or "none" for p in params}
    notebooks, origin = ", ".join(a.resolved["notebooks"]), " and ".join(dict.fromkeys(where[k] for k in keys))
    idle = idle_parameters(a.resolved, b.resolved)

    def bundles(p: str) -> str:  # (where other members' values make p act: the grid it meant, as bundles)
        other, combos = ACTS_ONLY_WITH.get(p, ("", ()))[0], []
        for m, idle_in in zip(members, idle_of):
            if other and (combo := {other: m.resolved[other], **({} if p in idle_in else {p: m.resolved[p]})}) \
                    not in combos:
                combos.append(combo)
        return "" if all(p not in c for c in combos) else (
            "; or vary it only where it acts, each combination a bundle of a key of your own: `runs: ["
            + ", ".join("{" + ", ".join(f"{k}: {v}" for k, v in c.items()) + "}" for c in combos) + "]`")
    why = [f"generate is false, so no candidates are generated and {p} shapes nothing; set generate: true, or take "
           f"{p} out of the grid" if p in unused_generation(a.resolved, b.resolved) else
           f"{p} acts only with {idle[p]}, which neither member has; set that, or take {p} out of the grid{bundles(p)}"
           if p in idle else
           f"{p} only decides how the work is cut and run, not what the data holds; take it out of the grid"
           if p in NOT_SHAPING else
           f"{p} is read by {readers[p]}, which the members do not run (notebooks: {notebooks}); add that notebook "
           f"to notebooks, or take {p} out of the grid" if p not in shaped[i] else
           f"{p} is {shaped[i][p]!r} in both once resolved (the params file's value where the grid sets none); give "
           f"them values that differ" for p in params]
    raise ParameterError(f"{' and '.join('family.grid.' + k for k in keys)} in {origin} does not tell members "
                         f"{a.name} and {b.name} apart, they would be the same run: {'; '.join(why)}.")


def plan_family(values: dict[str, Any], *, default_name: str, grid_args: dict[str, list[Any]] | None = None,
                out: str | None = None, where: str = "the params file", given_as: str = "--out") -> Family:
    """The family the values declare (`family:`, and/or `--grid`), every member checked before any work."""
    spec = values.get("family") or {}
    if not isinstance(spec, dict):
        raise ParameterError(f"family in {where} must be a mapping with {sorted(SPEC_KEYS)}, got {spec!r}.")
    if unknown := sorted(set(spec) - SPEC_KEYS):
        raise ParameterError(f"family in {where} has unknown key{'s' * (len(unknown) > 1)} {unknown}; it takes "
                             f"{sorted(SPEC_KEYS)}.")
    grid = spec.get("grid") or {}  # each checked where it was written, then --grid's keys replace the file's
    if grid or not grid_args:
        check_grid(grid, where)
    grid = {**grid, **(check_grid(grid_args, "--grid") if grid_args else {})}
    jobs = spec.get("jobs", 1)
    if not isinstance(jobs, int) or jobs < 1:
        raise ParameterError(f"family.jobs in {where} must be a whole number >= 1, got {jobs!r}.")
    name = unicodedata.normalize("NFC", str(spec.get("name") or default_name))  # (as its members' and datasets')
    if folder_safe(name) != name:
        raise ParameterError(f"family.name {name!r} in {where} names a folder: use letters, digits, '.', '_' or '-'.")
    root = run_folder(out or values.get("run_dir"), name)
    if grid_args and not spec and not out:  # the folder the file's own run goes to
        raise ParameterError(f"--grid on {where}, which declares no family: its members would go into {root}, its "
                             f"run's folder; give the family its own --out DIR (a family's folder and a run's are "
                             f"never one).")

    combos = [dict(zip(grid, c)) for c in itertools.product(*map(enumerate, grid.values()))]
    grids = [{k: v for k, (_, v) in combo.items()} for combo in combos]
    names_now = member_names(combos, spec.get("member_name"), where)
    names = older_named(root, name, grids, names_now,
                        member_names(combos, spec.get("member_name"), where, ascii_folder_safe), where)
    base = {k: v for k, v in values.items() if k != "family"}
    members = []
    for i, (grid_values, member, now) in enumerate(zip(grids, names, names_now)):
        member_values = dict(base, run_name=f"{name}-{member}", run_dir=str(root / member))
        member_values.update(item for key, value in grid_values.items() for item in settings_of(key, value).items())
        validate_all(member_values, where=f"member {member!r} of family {name!r} ({where})", advice=GRID_ADVICE)
        resolved = resolve_parameters(member_values)
        members.append(Member(index=i, name=member, grid_values=grid_values, values=member_values,
                              run_dir=root / member, fingerprint=run_fingerprint(resolved), resolved=resolved,
                              name_now=now if now != member else None))
    check_members_differ(grid, members, {key: "--grid" if key in (grid_args or {}) else where for key in grid})
    return Family(name=name, root=root, members=members, jobs=jobs, given_as=given_as)


def why_run_again(member: Member) -> str:
    """Why the member's run directory does not hold a complete run of the same fingerprint; "" when it does."""
    return Manifest(member.run_dir).unheld(member.fingerprint, member.values.get("selfcheck"), member.resolved)


def is_done(member: Member) -> bool:
    return not why_run_again(member)


def short_of(unfinished: dict[str, list[str]]) -> str:
    """A family's error where not every member is complete (`unfinished`: {what they are: names}); "" if all are."""
    said = "; ".join(f"{', '.join(names)} {what}" for what, names in unfinished.items() if names)
    return said and f"not every member is complete: {said}"
