"""Families of runs: a grid over parameters expanded into members, each a complete run directory, run one after
another, N at a time, or one per Slurm array task; then the family view (notebooks/05_family).

    family:
      name: part2
      grid: {mini_index: [0, 1, 2, 3]}            # several keys: the product, in the order written
      member_name: "mini_{mini_index}"            # optional; default "mini_index-0" ("key-value" joined by "__")
      jobs: 1                                     # optional; members at once (--jobs overrides)

A grid key is a parameter (its values are that parameter's), or a name of your own whose values are mappings
of parameters set together, each optionally with its own `name` (e.g. `part: [{name: part0, part_start: 0,
part_stop: 20000}, ...]`). Members write `runs/<family>/<member>/`; their manifests record `family` (name,
member, grid values, fingerprint). A member already complete with the same fingerprint is not run again, so
a killed family continues where it stopped, and members that share rows share work through the row cache
(repro.cache).
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import __version__
from .cache import check_format
from .errors import ParameterError, ReproError
from .manifest import Manifest
from .parameters import FamilyViewParams, all_fields, build, load_params_file, validate_all
from .paths import default_run_dir, find_params, resolve_user_path
from .runner import KERNEL_NAME, check_run_root, resolve_parameters, run_notebooks
from .runner import configure as configure_run
from .runner import main as run_main
from .work import fingerprint_of

FAMILY_NOTEBOOK = "05_family"
SPEC_KEYS = {"name", "grid", "member_name", "jobs"}
# parameters a grid cannot vary: where a member goes is the family's to decide, and the notebooks are the same
NOT_IN_GRID = {"run_name", "run_dir", "notebooks", "family", "selfcheck"}
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


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
    fingerprint: str

    def record(self, family: str) -> dict[str, Any]:
        """What the member's manifest records under `family`."""
        return {"name": family, "member": self.name, "index": self.index, "grid": self.grid_values,
                "fingerprint": self.fingerprint}


@dataclass
class Family:
    name: str
    root: Path
    grid: dict[str, list[Any]]
    members: list[Member] = field(default_factory=list)
    jobs: int = 1

    def member(self, name: str) -> Member:
        """The member called `name`, or at that index from 0 (a Slurm array task id); else an error listing them."""
        for m in self.members:
            if m.name == name:
                return m
        if name.isdigit() and int(name) < len(self.members):
            return self.members[int(name)]
        raise FamilyError(f"--member {name!r} is not a member of family {self.name!r}; its members are "
                          f"{', '.join(m.name for m in self.members)} (or their index, 0 to {len(self.members) - 1}).")


# ------------------------------------------------------------------------------------------------
# the grid: checked, expanded, named
# ------------------------------------------------------------------------------------------------
def parse_grid_args(items: list[str]) -> dict[str, list[Any]]:
    """`--grid KEY=V1,V2,...` items as a grid (values read as YAML: `--grid mini_index=0,1,2,3`)."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--grid expects KEY=VALUE1,VALUE2,..., got {item!r}; for example "
                                 f"--grid mini_index=0,1,2,3")
        try:
            values = yaml.safe_load(f"[{raw}]")
        except yaml.YAMLError as exc:
            raise ParameterError(f"--grid {item}: the values are not a YAML list ({exc}).") from None
        grid[key.strip()] = values
    return grid


def check_grid(grid: Any, where: str) -> dict[str, list[Any]]:
    """The grid if every key is a parameter (or a bundle of parameters) with a non-empty list of values."""
    if not isinstance(grid, dict) or not grid:
        raise ParameterError(f"family.grid in {where} must map parameters to lists of values, e.g. "
                             f"grid: {{mini_index: [0, 1, 2, 3]}}; got {grid!r}.")
    known = all_fields()
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ParameterError(f"family.grid.{key} in {where} must be a non-empty list of values, got {values!r}: "
                                 f"a family needs at least one value per key.")
        if key in NOT_IN_GRID:
            raise ParameterError(f"family.grid.{key} in {where}: {key} cannot vary within a family (members go to "
                                 f"runs/<family>/<member>/ and run the same notebooks); remove it from the grid.")
        if key in known:
            continue
        if not all(isinstance(v, dict) for v in values):
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ParameterError(
                f"family.grid.{key} in {where}: {key!r} is not a parameter.{hint} A grid key is a parameter, or a "
                f"name of your own whose values are mappings of parameters set together (e.g. part: "
                f"[{{part_start: 0, part_stop: 20000}}, ...]).")
        for value in values:
            for k in value:
                if k != "name" and (k not in known or k in NOT_IN_GRID):
                    raise ParameterError(f"family.grid.{key} in {where}: {k!r} in {value!r} is not a parameter a "
                                         f"member can set.")
    return grid


def _label(value: Any) -> str:
    """A value as a folder name may show it."""
    if isinstance(value, str):
        text = Path(value).name if ("/" in value and Path(value).exists()) else value
    elif isinstance(value, (list, dict)):
        return "h" + fingerprint_of(value)[:8]
    else:
        text = str(value)
    return _SAFE.sub("-", text).strip("-") or "empty"


def member_names(combos: list[dict[str, Any]], template: str | None, where: str) -> list[str]:
    """Each member's folder name: `template` filled with the values (a bundle by its `name`), or key-value pairs."""
    names = []
    for i, combo in enumerate(combos):
        labels = {}
        for key, value in combo.items():
            if isinstance(value, dict):  # a bundle: its own name, else its position in the list
                labels[key] = _label(value.get("name", f"{key}{value['_position']}"))
            else:
                labels[key] = _label(value)
        if template:
            try:
                name = template.format(**labels)
            except (KeyError, IndexError, ValueError) as exc:
                raise ParameterError(f"family.member_name {template!r} in {where} cannot be filled ({exc!r}); it may "
                                     f"name the grid keys {sorted(combo)} in braces.") from None
            name = _SAFE.sub("-", name)
        else:
            name = "__".join(labels[k] if isinstance(v, dict) else f"{k}-{labels[k]}" for k, v in combo.items())
        names.append(name)
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            a, b = combos[seen[name]], combos[i]
            raise ParameterError(
                f"Two members of the family in {where} are both named {name!r} ({_plain(a)} and {_plain(b)}): "
                f"every member needs its own folder. Give family.member_name a pattern that tells them apart, "
                f"e.g. one naming every grid key.")
        seen[name] = i
    return names


def _plain(combo: dict[str, Any]) -> dict[str, Any]:
    return {k: ({kk: vv for kk, vv in v.items() if kk != "_position"} if isinstance(v, dict) else v)
            for k, v in combo.items()}


def member_fingerprint(resolved: dict[str, Any]) -> str:
    """What makes a finished member reusable: every resolved parameter but where it lives, and the code's version."""
    return fingerprint_of({"parameters": {k: v for k, v in resolved.items() if k not in ("run_dir", "run_name")},
                           "repro": __version__})


def plan_family(values: dict[str, Any], *, default_name: str, grid_args: dict[str, list[Any]] | None = None,
                out: str | None = None, where: str = "the params file") -> Family:
    """The family the values declare (`family:`, and/or `--grid`), every member checked before any work."""
    spec = values.get("family") or {}
    if not isinstance(spec, dict):
        raise ParameterError(f"family in {where} must be a mapping with {sorted(SPEC_KEYS)}, got {spec!r}.")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise ParameterError(f"family in {where} has unknown key(s) {unknown}; it takes {sorted(SPEC_KEYS)}.")
    grid = check_grid({**(spec.get("grid") or {}), **(grid_args or {})},
                      where if not grid_args else f"{where} and --grid")
    jobs = spec.get("jobs", 1)
    if not isinstance(jobs, int) or jobs < 1:
        raise ParameterError(f"family.jobs in {where} must be a whole number >= 1, got {jobs!r}.")
    name = str(spec.get("name") or default_name)
    if _SAFE.sub("-", name) != name:
        raise ParameterError(f"family.name {name!r} in {where} names a folder: use letters, digits, '.', '_' or '-'.")
    root = Path(resolve_user_path(out or values.get("run_dir"), may_be_id=False) or default_run_dir(name))
    check_run_root(root, "--out" if out else "run_dir")

    keys = list(grid)
    positioned = {k: [({**v, "_position": i} if isinstance(v, dict) else v) for i, v in enumerate(vs)]
                  for k, vs in grid.items()}
    combos = [dict(zip(keys, c)) for c in itertools.product(*(positioned[k] for k in keys))]
    names = member_names(combos, spec.get("member_name"), where)
    base = {k: v for k, v in values.items() if k != "family"}
    members = []
    for i, (combo, member) in enumerate(zip(combos, names)):
        member_values = dict(base)
        for key, value in combo.items():
            if isinstance(value, dict):
                member_values.update({k: v for k, v in value.items() if k not in ("name", "_position")})
            else:
                member_values[key] = value
        member_values["run_name"] = f"{name}-{member}"
        member_values["run_dir"] = str(root / member)
        validate_all(member_values, where=f"member {member!r} of family {name!r} ({where})")
        members.append(Member(index=i, name=member, grid_values=_plain(combo), values=member_values,
                              run_dir=root / member, fingerprint=member_fingerprint(resolve_parameters(member_values))))
    return Family(name=name, root=root, grid=grid, members=members, jobs=jobs)


# ------------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------------
def is_done(member: Member) -> bool:
    """Whether the member's run directory holds a complete run of the same fingerprint."""
    data = Manifest(member.run_dir).read()
    return data.get("status") == "complete" and (data.get("family") or {}).get("fingerprint") == member.fingerprint


def run_member(family: Family, member: Member, *, kernel: str = KERNEL_NAME, log_output: bool = False) -> str:
    """Run one member here ('done' / 'failed'), or say it is already complete ('reused')."""
    if is_done(member):
        print(f"repro run: family {family.name}: {member.name} is complete with the same parameters -> "
              f"{member.run_dir} (not run again)")
        return "reused"
    print(f"repro run: family {family.name}: member {member.index + 1}/{len(family.members)} {member.name} "
          f"-> {member.run_dir}", flush=True)
    code = run_notebooks(resolve_parameters(member.values), member.run_dir, kernel=kernel, log_output=log_output,
                         selfcheck=member.values.get("selfcheck"), record={"family": member.record(family.name)})
    return "done" if code == 0 else "failed"


def _member_command(args: argparse.Namespace, member: Member) -> list[str]:
    """The command line that runs `member` alone: the same params, sets, grid and folder, plus --member."""
    cmd = [sys.executable, "-m", "repro.cli", "run", str(args.params), "--member", member.name,
           "--kernel", args.kernel]
    for item in args.overrides:
        cmd += ["--set", item]
    for item in args.grid:
        cmd += ["--grid", item]
    if args.out:
        cmd += ["--out", str(args.out)]
    return cmd


def _run_in_subprocess(args: argparse.Namespace, family: Family, member: Member) -> str:
    if is_done(member):
        return run_member(family, member)  # says so, runs nothing
    log = family.root / "logs" / f"{member.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"repro run: family {family.name}: {member.name} started (log: {log})", flush=True)
    with open(log, "w") as f:
        code = subprocess.run(_member_command(args, member), stdout=f, stderr=subprocess.STDOUT).returncode
    print(f"repro run: family {family.name}: {member.name} {'done' if code == 0 else 'FAILED, see ' + str(log)}",
          flush=True)
    return "done" if code == 0 else "failed"


def run_family(args: argparse.Namespace, family: Family) -> int:
    """Every member (one after another, or `jobs` at once in their own processes), then the family view."""
    start = time.monotonic()
    family.root.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or family.jobs
    if jobs == 1:
        statuses = [run_member(family, m, kernel=args.kernel, log_output=args.log_output) for m in family.members]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            statuses = list(pool.map(lambda m: _run_in_subprocess(args, family, m), family.members))
    failed = [m.name for m, s in zip(family.members, statuses) if s == "failed"]
    # the family folder's own record holds the family view's parameters only (the members hold theirs)
    view = build(FamilyViewParams, {k: v for k, v in family.members[0].values.items()
                                    if k in FamilyViewParams.model_fields and k != "run_dir"}).model_dump()
    code = run_notebooks({**view, "run_name": family.name, "notebooks": [FAMILY_NOTEBOOK]}, family.root,
                         kernel=args.kernel, log_output=args.log_output)
    print(f"repro run: family {family.name}: {statuses.count('done')} run, {statuses.count('reused')} already "
          f"complete, {len(failed)} failed, in {time.monotonic() - start:.0f} s -> {family.root}")
    if failed:
        print(f"repro run: FAILED members: {', '.join(failed)}; their executed notebooks say why; running the same "
              f"command again continues them (finished chunks and cached rows are kept).", file=sys.stderr)
        return 1
    return code


# ------------------------------------------------------------------------------------------------
# the command line: `repro run` with --grid, --jobs, --member (a params file without a family runs as before)
# ------------------------------------------------------------------------------------------------
def configure(parser: argparse.ArgumentParser) -> None:
    configure_run(parser)
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="run a family: one member per value (repeatable: the product); adds to family.grid")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="run N members of a family at once, each in its own process (default: family.jobs or 1)")
    parser.add_argument("--member", metavar="NAME",
                        help="run only this member of the family, by name or index from 0 (a Slurm array task id)")


def check_row_cache(values: dict[str, Any]) -> None:
    """Refuse, before any notebook runs, a row cache of another key format (repro.cache)."""
    construct = validate_all(values)["construct"]
    if construct.row_cache is not None:
        check_format(construct.row_cache)


def main(args: argparse.Namespace) -> int:
    params_file = find_params(args.params)
    values = load_params_file(params_file, args.overrides)
    grid_args = parse_grid_args(args.grid)
    check_row_cache(values)
    if not values.get("family") and not grid_args:
        if args.member or args.jobs:
            raise ParameterError(f"--member and --jobs run members of a family, and {params_file} declares none: add "
                                 f"family: {{grid: ...}} to it, or --grid KEY=V1,V2,...")
        return run_main(args)
    if args.jobs is not None and args.jobs < 1:
        raise ParameterError(f"--jobs {args.jobs} must be >= 1 (members run at once).")
    family = plan_family(values, default_name=values.get("run_name") or params_file.stem, grid_args=grid_args,
                         out=args.out, where=str(params_file))
    if args.member:
        member = family.member(args.member)
        return 0 if run_member(family, member, kernel=args.kernel, log_output=args.log_output) != "failed" else 1
    print(f"repro run: family {family.name} of {len(family.members)} members -> {family.root}")
    return run_family(args, family)
