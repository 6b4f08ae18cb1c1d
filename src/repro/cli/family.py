"""`repro run` over a family of runs (repro.family): every member in turn, `--jobs N` at once (each its own
`repro run ... --member NAME` process, logged in runs/<family>/logs/), or `--member NAME` alone; then 05_family."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..cache import check_format
from ..errors import EXIT_BUSY, ParameterError, counted, printable
from ..family import Family, Member, grid_keys, is_done, parse_grid_args, plan_family, short_of, why_run_again
from ..parameters import (FAMILY_NOTEBOOK, FamilyViewParams, build, load_params_file, parse_set, resolve_parameters,
                          say_idle, validate_all)
from ..jobs import fingerprint_of
from ..manifest import Manifest, ended as run_ended, now, stopped_by
from ..paths import FAMILY_LOGS, RunDir, absolute_caches, find_params, wait_advice, write_problem
from ..revisions import run_fingerprint
from .preflight import Check, checkout_checks, preflight, require, say_notes
from .rerun import (busy, changed_parameters, executed, kept_to_continue, kind_check, rebuilds, replace_run,
                    rerun_check, selfcheck_check, writing)
from .interrupt import EXIT_INTERRUPTED, INTERRUPTED, STOP_SIGNALS, noting_stops, say
from .run import (KERNEL_NAME, check_kernel, check_run_root, ensure_kernel, folder_given_as, read_parts,
                  run_notebooks, run_params)
from .run import configure as configure_run

NOT_STARTED = "not started"  # a member of a family stopped before its turn
BUSY = "busy"  # a member another command was running at its turn (a `repro run --member`, say): not run
REFUSED = "refused"  # a member busy at the family's checks, free at its turn, that its own checks refused then


def member_given_as(family: Family) -> str:
    """What a member's refusal says to change: the family's folder, as it was given (--out or run_dir)."""
    return f"{family.given_as} (the family's folder)"


def member_checks(family: Family, member: Member, force: bool, why: str,
                  checkout: list[Check]) -> tuple[list[Check], dict[str, Any]]:
    """A member's checks before it runs (run directory, then machine; `why`: why it runs again; `checkout`: git's
    word, asked once for all), and the changed parameters replacing its run (with 01_construct among its notebooks)."""
    resolved, run, given_as = member.resolved, RunDir(member.run_dir), member_given_as(family)
    changed = changed_parameters(run, resolved)
    advice = f"give the family another {family.given_as} (its members go into its folder, by name)"
    if what := write_problem(member.run_dir):  # (a file there: each check below would fail on it)
        return [Check("run directory", False, f"{member.run_dir} {what}: a member's run goes into its own folder "
                                              f"there. Move what is in the way, or {advice}", problem="REFUSED")], {}
    checks = kind_check(run, resolved["notebooks"], given_as, advice, resolved) or [
        rerun_check(run, changed, force, given_as, resolved, why, member=True)]
    # (the self-check's line, alike in every member, `grouped` says once)
    checks += selfcheck_check(run, member.values.get("selfcheck"), executed(resolved["notebooks"], why, force))
    return [*checks, *preflight(resolved, run.root, None, checkout)], changed if rebuilds(resolved["notebooks"]) else {}


def grouped(per_member: dict[str, list[Check]]) -> list[Check]:
    """The members' checks, each different one once, saying which members it is about, in the order of a run's."""
    found: dict[Check, tuple[int, list[str]]] = {}
    for name, checks in per_member.items():
        for position, check in enumerate(checks):
            found.setdefault(check, (position, []))[1].append(name)
    return [replace(check, what=f"{check.what} (" + ("every member" if len(names) == len(per_member) > 1 else
                                                     f"member {', '.join(names)}") + ")")
            for check, (_, names) in sorted(found.items(), key=lambda item: item[1][0])]


def plan_check(family: Family, force: bool) -> list[Check]:
    """A family's folder holding another family's record (its view and family.json would go): refused unless --force."""
    if (other := Manifest(family.root).read().get("family_name", family.name)) == family.name:
        return []
    held = f"{family.root} holds family {other}'s record, not {family.name}'s"
    if force:
        return [Check("family folder", True, f"{held}; --force: it becomes {family.name}'s (the members of {other} "
                                             f"stay in their folders, left out of the family view)")]
    return [Check("family folder", False, f"{held}: give this family its own {family.given_as}, or pass --force to "
                                          f"make the folder {family.name}'s", problem="REFUSED")]


def view_parameters(family: Family) -> tuple[dict[str, Any], list[str]]:
    """05_family's parameters over `family` (a value its members differ in takes its default), and those values."""
    varied = sorted(k for k in FamilyViewParams.model_fields.keys() - {"run_dir", "run_name"}
                    if len({repr(m.values.get(k)) for m in family.members}) > 1)
    view = build(FamilyViewParams, {k: v for k, v in family.members[0].values.items()
                                    if k != "run_dir" and k not in varied}).model_dump()
    return {**view, "run_name": family.name, "notebooks": [FAMILY_NOTEBOOK]}, varied


def view_check(family: Family, force: bool) -> list[Check]:
    """A complete family's view made with other values (05_family run again on its own since): refused unless --force
    (a family that stopped is continued: its view is made again once its members are done)."""
    view, root = view_parameters(family)[0], RunDir(family.root)
    if Manifest(root).read().get("status") != "complete" or not (changed := changed_parameters(root, view)):
        return []
    # (member: no `--set` of the old values continues it, as for a member: they would be its members' too)
    return [replace(rerun_check(root, changed, force, family.given_as, view, member=True), what="family folder")]


def say_dropped(family: Family) -> dict[str, Any]:
    """Say which members of the last plan (the family folder's record, returned) are no longer in the grid."""
    seen = Manifest(family.root).read()
    if dropped := [name for name in seen.get("members") or () if name not in family.plan]:
        is_, its = ("is", "its folder stays") if len(dropped) == 1 else ("are", "their folders stay")
        print(printable(f"repro run: family {family.name}: {', '.join(dropped)} of its last plan {is_} no longer in "
                        f"the grid: left out of the family view ({its})"))  # (names the record holds)
    return seen


def record_plan(family: Family) -> None:
    """Record the members planned before any runs (05_family shows those); say which of the last plan are dropped."""
    record, planned, seen = Manifest(family.root), family.plan, say_dropped(family)
    if (seen.get("members"), seen.get("family_name")) != (planned, family.name):
        record.update(members=planned, family_name=family.name)


def members_state(family: Family) -> str:
    """What the members hold now (their records' fingerprints and outputs): the family view is made of that."""
    return fingerprint_of([(d.get("fingerprint"), d.get("outputs")) for d in (Manifest(m.run_dir).read()
                                                                                for m in family.members)])


def view_current(family: Family) -> bool:
    """Whether the family folder holds this family's complete view of these parameters, of its members as they are."""
    view, record = view_parameters(family)[0], Manifest(family.root)
    return ((seen := record.read()).get("members_state"), seen.get("family_name", family.name)) == (
        members_state(family), family.name) and not record.unheld(run_fingerprint(view), parameters=view)


def prepare(args: argparse.Namespace, params_file: Path, family: Family, members: list[Member],
            why: dict[str, str]) -> int | None:
    """Before any run, check the family's folder and members to run (`why`: why each runs again) but those busy then
    (checked at their turn) (`--check`: print, return exit code); then remove what replaced members left."""
    family.busy = {m.name: w for m in members if why[m.name] and (w := RunDir(m.run_dir).writer())}
    pending = [m for m in members if why[m.name] and m.name not in family.busy]
    checkout = checkout_checks() if pending else []  # (one git process, not one a member)
    found = {m.name: member_checks(family, m, args.force, why[m.name], checkout) for m in pending}
    checks = grouped({name: checks for name, (checks, _) in found.items()})
    checks[:0] = kind_check(RunDir(family.root), [FAMILY_NOTEBOOK], family.given_as) or plan_check(family, args.force)
    view = []  # (a member alone runs beside the others, and makes no family view)
    if not args.member and (writer := RunDir(family.root).writer()):
        checks.insert(0, Check("family folder", False, busy(family.given_as, writer), problem="BUSY"))
    elif not args.member:
        checks[:0] = view = view_check(family, args.force)
        if last := Manifest(family.root).last_run():  # (a `running` one nobody holds was killed)
            checks.insert(0, Check("family folder", True, f"{family.root} (continues the family there; its last run "
                                                          f"{last}: the same command{' without --check' * args.check} "
                                                          f"continues it)"))
    # (a member alone exits 75 then; one of a family is looked at again at its turn)
    then = "" if args.member else ("if that has ended by its turn, it is checked and run then; else it is not run "
                                   "here (not failed): ")
    checks[:0] = [Check("members", True, f"{name}: busy, {'not checked' if then else 'not run here (not failed)'}: "
                                         f"{writer} is writing to {family.member(name).run_dir} now; {then}"
                                         f"{wait_advice(writer)}, then run the same command again")
                  for name, writer in family.busy.items()]
    if done := [m.name for m in members if m not in pending and m.name not in family.busy]:
        checks.insert(0, Check("members", True, f"{', '.join(done)}: complete with the same parameters, not run again"))
    if args.check:  # (the run says so as it records its plan)
        say_dropped(family)
    if (code := require(checks, params_file, args.check)) is not None:
        return code
    ensure_kernel(args.kernel)  # (another environment's: refused before anything is written, as --kernel's)
    say_notes(checks)
    for member in (m for m in pending if found[m.name][1]):
        with writing(RunDir(member.run_dir), member_given_as(family)):
            replace_run(RunDir(member.run_dir), args.force)
        print(printable(f"  run directory (member {member.name}): {found[member.name][0][0].detail}"))  # why replaced
    for check in view:  # (--force: why the view is made again)
        print(printable(f"  {check.what}: {check.detail}"))
    return None


def ended(code: int) -> str:
    """A member's run as its exit status says (a stop signal that ended the process came before its handlers)."""
    return {0: "done", EXIT_INTERRUPTED: INTERRUPTED, **{-signum: INTERRUPTED for signum in STOP_SIGNALS},
            EXIT_BUSY: BUSY}.get(code, "failed")


def run_elsewhere(family: Family, member: Member, now: bool = True, file: Any = None) -> bool:
    """Whether another process writes in `member`'s folder, now or at the checks (family.busy); says so on `file`."""
    if not (writer := RunDir(member.run_dir).writer() if now else family.busy.get(member.name)):
        return False
    print(printable(f"repro run: family {family.name}: {member.name} is being run elsewhere: {writer} is writing to "
                    f"{member.run_dir}; not run here (busy, not failed)"), file=file)  # (the text its lock holds)
    return True


def checked_at_its_turn(family: Family, member: Member, force: bool) -> bool:
    """Whether a member busy at the family's checks passes them at its turn (its run then replaced as by prepare)."""
    # (its refusals alone are said here, no note: git is not asked about the checkout again)
    checks, changed = member_checks(family, member, force, why_run_again(member), [])
    if refused := [f"{c.what}: {c.detail}" for c in checks if not c.ok]:
        print(printable(f"repro run: family {family.name}: {member.name}, free at its turn, is not run: "
                        f"{'; '.join(refused)}"), file=sys.stderr)  # (as Check.line says them)
        return False
    if changed:
        with writing(RunDir(member.run_dir), member_given_as(family)):
            replace_run(RunDir(member.run_dir), force)
    return True


def run_member(family: Family, member: Member, *, kernel: str = KERNEL_NAME, log_output: bool = False,
               force: bool = False, looked: bool = False) -> str:
    """Run one member here ('done' / 'failed' / 'interrupted'), or say it is complete ('reused'), run by another
    command ('busy': looked at now, or at the checks if `looked`) or, busy at the checks, refused now ('refused')."""
    if not (stale := why_run_again(member)):
        print(f"repro run: family {family.name}: {member.name} is complete with the same parameters -> "
              f"{member.run_dir} (not run again)")
        return "reused"
    if run_elsewhere(family, member, now=not looked):
        return BUSY
    if member.name in family.busy and not checked_at_its_turn(family, member, force):
        return REFUSED
    print(f"repro run: family {family.name}: member {member.index + 1}/{len(family.members)} {member.name} "
          f"-> {member.run_dir}")
    with writing(RunDir(member.run_dir), member_given_as(family)):
        values = resolve_parameters(member.values)  # (a new self-check alone: only the card, as a run alone)
        code = run_notebooks(values, member.run_dir, kernel=kernel, log_output=log_output,
                             selfcheck=member.values.get("selfcheck"), record={"family": member.record(family.name)},
                             fingerprint=member.fingerprint, only=executed(values["notebooks"], stale, force))
    return ended(code)


def _member_command(args: argparse.Namespace, member: Member) -> list[str]:
    """The command line that runs `member` alone: the same params, sets, grid, folder and options, plus --member."""
    sets = [word for item in args.overrides for word in ("--set", item)]
    grid = [word for item in args.grid for word in ("--grid", item)]
    options = [option for option, given in (("--force", args.force), ("--log-output", args.log_output)) if given]
    return ([sys.executable, "-m", "repro.cli", "run", str(args.params), "--member", member.name,
             "--kernel", args.kernel, *sets, *grid, *options] + (["--out", str(args.out)] if args.out else []))


class _Started:
    """The members' processes started so far, and whether the family is stopping (then no other starts)."""

    def __init__(self) -> None:
        self.lock, self.processes, self.stopping = threading.Lock(), [], False

    def stop(self, how: str) -> None:
        """No member starts; running ones get this stop (in own sessions, Ctrl-C reaches them only via this)."""
        with self.lock:
            self.stopping = True
        for process in self.processes:
            process.send_signal(next(signum for signum, name in STOP_SIGNALS.items() if name == how))


def _run_in_subprocess(args: argparse.Namespace, family: Family, member: Member, started: _Started) -> str:
    if is_done(member):
        return run_member(family, member)  # says so, runs nothing
    if member.name in family.busy and run_elsewhere(family, member):  # (free now: its process checks it)
        return BUSY
    log = family.root / FAMILY_LOGS / f"{member.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with started.lock:
        if started.stopping:
            return NOT_STARTED
        print(f"repro run: family {family.name}: {member.name} started (log: {log})")
        with open(log, "a") as f:  # a run again keeps the last one's log (why it stopped) above its own
            if f.tell():
                f.write(f"\n--- repro run again, {now()} ---\n")
                f.flush()
            started.processes.append(process := subprocess.Popen(_member_command(args, member), stdout=f,
                                                                 stderr=subprocess.STDOUT, start_new_session=True))
    code = process.wait()  # (one busy at the checks, refused at its turn by its checks there: repro's error, exit 2)
    status = REFUSED if code == 2 and member.name in family.busy else ended(code)
    print(f"repro run: family {family.name}: {member.name} {'done' if code == 0 else f'{status}, see {log}'}")
    return status


def _run_at_once(args: argparse.Namespace, family: Family, jobs: int) -> tuple[list[str], bool]:
    """Every member's status, `jobs` at once in own processes, and whether the command was stopped (Ctrl-C, SIGTERM)."""
    started, pool = _Started(), ThreadPoolExecutor(max_workers=jobs)
    runs = [pool.submit(_run_in_subprocess, args, family, member, started) for member in family.members]
    with noting_stops() as stops:  # (one more while the members stop is noted, not raised: it cuts nothing short)
        while not stops and wait(runs, timeout=0.2).not_done:
            pass
        if stops:  # the running members end as a run stopped so does, their chunks kept
            started.stop(stops[0])
        pool.shutdown(cancel_futures=True)
    return [NOT_STARTED if run.cancelled() else run.result() for run in runs], bool(stops)


def run_family(args: argparse.Namespace, family: Family) -> int:
    """Every member (one after another, or `jobs` at once in their own processes), then the family view."""
    start = time.monotonic()
    family.root.mkdir(parents=True, exist_ok=True)
    view, varied = view_parameters(family)
    planned, fingerprint, record = family.plan, run_fingerprint(view), Manifest(family.root)
    # the family's record says it runs until its view is written (the view on disk: `view` names its members)
    record.update(status="running", driver="repro run", started=(started := now()), finished=None, error=None)
    stopped = False  # (the command itself: with --jobs, its members may all have ended before they saw it)
    try:
        if (jobs := args.jobs or family.jobs) == 1:  # Ctrl-C in a member stops the family there
            statuses = []
            for member in family.members:
                statuses.append(run_member(family, member, kernel=args.kernel, log_output=args.log_output,
                                           force=args.force))
                if statuses[-1] == INTERRUPTED:
                    break
        else:
            statuses, stopped = _run_at_once(args, family, jobs)
    except BaseException as exc:  # (Ctrl-C between members, an error outside their runs)
        record.finish_run(run_ended(exc), stopped_by(exc))
        raise
    if stopped or INTERRUPTED in statuses:
        names = [m.name for m, s in zip(family.members, statuses) if s == INTERRUPTED]
        left = [m.name for m, s in itertools.zip_longest(family.members, statuses) if s in (None, NOT_STARTED)]
        line = ("interrupted" + (f" in member{'s' * (len(names) > 1)} {', '.join(names)}" if names else "")
                + (f"; {', '.join(left)} not run" if left else "") + "; the family view was not written")
        record.finish_run(INTERRUPTED, line)
        say(f"repro run: family {family.name}: {line}. Run the same command again to continue "
            f"({kept_to_continue(family.members)}).")
        return EXIT_INTERRUPTED
    failed = [m.name for m, s in zip(family.members, statuses) if s == "failed"]
    if varied:
        print(f"repro run: family {family.name}: its members differ in {' and '.join(varied)}: the family view takes "
              f"its default ({', '.join(f'{k}={view[k]!r}' for k in varied)}) for its own intervals")
    state = members_state(family)  # (a member run again alone, with --member, since the view was made: not the same)
    busy = [m.name for m, s in zip(family.members, statuses) if s == BUSY]
    refused = [m.name for m, s in zip(family.members, statuses) if s == REFUSED]
    its, by = "its" if len(refused) == 1 else "their", "another command" if len(busy) == 1 else "other commands"
    unfinished = short_of({"failed": failed, f"refused at {its} turn": refused, f"being run by {by}": busy})
    # the view made of the members as they are, its notebook done: the family complete only once every member is
    # (busy: `failed` too, its error saying so: it ended short, at no signal; the same command continues it)
    code = run_notebooks(view, family.root, kernel=args.kernel, log_output=args.log_output, last_line=False,
                         record={"members": planned, "members_state": state, "started": started},  # (not the view's)
                         fingerprint=fingerprint, short_of=unfinished)
    if code == EXIT_INTERRUPTED:  # (its line said so: not a summary that reads as done)
        return code
    print(f"repro run: family {family.name}: {statuses.count('done')} run, {statuses.count('reused')} already "
          f"complete, {len(failed)} failed" + (f", {len(refused)} refused at {its} turn" if refused else "") +
          (f", {len(busy)} being run by {by}" if busy else "") +
          f", in {time.monotonic() - start:.0f} s -> {family.root}")
    say_left(family, failed, refused, busy, jobs)
    return 1 if failed or refused else EXIT_BUSY if busy else code


def say_left(family: Family, failed: list[str], refused: list[str], busy: list[str], jobs: int) -> None:
    """On stderr, a line for the members a family run left FAILED, REFUSED and BUSY each, saying what to do."""
    def of(names: list[str]) -> tuple[str, ...]:  # how a line speaks of its members
        return ((f"members: {', '.join(names)}", "their", "them", "folders", "say") if len(names) > 1 else
                (f"member: {names[0]}", "its", "it", "folder", "says"))

    if failed:
        members, its, it, _, _ = of(failed)
        print(f"repro run: FAILED {members}; {its} executed notebooks say why and what to change. Then the same "
              f"command again continues {it} ({kept_to_continue([m for m in family.members if m.name in failed])}).",
              file=sys.stderr)
    if refused:  # (one after another, its refusal is a line of this command's; with --jobs, in its process's log)
        members, its, it, folders, says = of(refused)
        logs, one = family.root / FAMILY_LOGS, len(refused) == 1
        where = (f"{its} line{'' if one else 's'} above" if jobs == 1 else
                 logs / f"{refused[0]}.log" if one else f"their logs in {logs}")
        print(f"repro run: REFUSED {members}: another command held {its} {folders} at the family's checks, and at "
              f"{its} turn {its} own checks refused {it} ({where} {says} why). The same command again refuses {it} "
              f"again: pass --force to replace a run of other parameters there, or give the family another "
              f"{family.given_as}.", file=sys.stderr)
    if busy:
        members, _, it, _, _ = of(busy)
        running, ends = ("other commands are", "they end") if len(busy) > 1 else ("another command is", "it ends")
        print(f"repro run: BUSY {members}: {running} running {it}; once {ends}, the same command again adds {it} to "
              f"the family view.", file=sys.stderr)


def configure(parser: argparse.ArgumentParser) -> None:
    configure_run(parser)
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="run a family: one member per value (repeatable: the product; each value read as --set "
                             "reads one); a key of family.grid: replaces the values of that key, the other keys kept")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="run N members of a family at once, each in its own process (default: family.jobs or 1)")
    parser.add_argument("--member", metavar="NAME",
                        help="run only this member of the family, by name or index from 0 (a Slurm array task id)")


def main(args: argparse.Namespace) -> int:
    absolute_caches()  # (before the checks, which read them as the kernels will)
    params_file = find_params(args.params)
    if args.kernel != KERNEL_NAME:  # a --kernel of no kernel or of another environment: refused before any work
        check_kernel(args.kernel)
    family_keys: dict[str, bool] = {}  # (named once the members are planned, as acting in none of them)
    values = load_params_file(params_file, args.overrides, grid=bool(args.grid), family_keys=family_keys)
    grid_args = parse_grid_args(args.grid)
    sets = set(parse_set(args.overrides or []))
    if both := sorted(set(grid_args) & sets):  # the grid's value would win unsaid
        raise ParameterError(f"--grid and --set both give {', '.join(both)}: a member takes the grid's value; give "
                             f"it once.")
    family_grid = values["family"].get("grid") if isinstance(values.get("family"), dict) else None
    if both := sorted(grid_keys(family_grid if isinstance(family_grid, dict) else {}) & sets):  # (else planning says)
        raise ParameterError(f"--set {', '.join(both)}: the family's grid in {params_file} gives each member its own "
                             f"value, which wins; change the grid there, or give --grid {both[0]}=V1,V2,... instead.")
    row_cache = validate_all(values)["construct"].row_cache
    if row_cache is not None:  # a row cache of another key format (repro.cache) is refused before any notebook runs
        check_format(row_cache, create=False)  # (nothing written here: generation and scoring make it)
    if args.jobs is not None and args.jobs < 1:
        raise ParameterError(f"--jobs {args.jobs} must be >= 1 (members run at once).")
    if not values.get("family") and not grid_args:
        if args.member or args.jobs:
            raise ParameterError(f"--member and --jobs run members of a family, and {params_file} declares none: add "
                                 f"family: {{grid: ...}} to it, or --grid KEY=V1,V2,...")
        return run_params(args, params_file, values)
    family = plan_family(values, default_name=values.get("run_name") or params_file.stem, grid_args=grid_args,
                         out=args.out or (values["run_dir"] if "run_dir" in sets else None), where=str(params_file),
                         given_as=folder_given_as(args, values))
    say_idle(params_file, family_keys, *(member.resolved for member in family.members))
    check_run_root(family.root, family.given_as, default := not (args.out or values.get("run_dir")), unread=True)
    members = [family.member(args.member)] if args.member else family.members
    why = {m.name: why_run_again(m) for m in members}  # (hashed once: the outputs of a complete run can be large)
    # (as a run's: before its folder is checked; a member alone makes no view, and is not run again even with --force)
    if not any(why.values()) and (args.member or view_current(family)):
        done, where = ((f"{members[0].name} is", members[0].run_dir) if args.member else
                       ("every member and the family view are", family.root))
        print(f"repro run: family {family.name}: nothing to do: {done} complete, of these parameters, "
              f"{read_parts(*(m.fingerprint for m in members))}code and packages -> {where}")
        return 0
    check_run_root(family.root, family.given_as, default)  # (with nothing to do, it need not be writable)
    if (code := prepare(args, params_file, family, members, why)) is not None:
        return code
    if args.member and run_elsewhere(family, members[0], now=False, file=sys.stderr):  # (as its checks found)
        return EXIT_BUSY
    # the whole family holds its folder (two would write one view); a member alone runs beside the others (--jobs)
    with contextlib.nullcontext() if args.member else writing(RunDir(family.root), family.given_as):
        record_plan(family)
        if args.member:  # its exit status says how it ended (a Slurm array's afterok must not follow an interruption)
            status = run_member(family, members[0], kernel=args.kernel, log_output=args.log_output, looked=True,
                                force=args.force)
            return {"failed": 1, INTERRUPTED: EXIT_INTERRUPTED, BUSY: EXIT_BUSY}.get(status, 0)
        print(f"repro run: family {family.name} of {counted(len(family.members), 'member')} -> {family.root}")
        return run_family(args, family)
