"""`manifest.json`: a run's parameters, versions, commit, counts, timings and output hashes, rewritten atomically by
every stage, so a run that stops half-way says `running` or `failed`, never `complete`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from . import __version__
from .errors import DataError, Interrupted, ParameterError, listed, notice
from .jobs import atomic_write_json, json_default, safe_chunks
from .parameters import RUN_KEYS, differing, notebook_fields, unused_generation
from .paths import (LOCK_NAME, SELFCHECK_JSON, STAND_IN_MARKER, RunDir, checkout_root, now, project_root,
                    rebased, record_project, resolve_user_path, shipped, within)
from .records import MANIFEST, SELFCHECK, read_record

TRACKED_PACKAGES = ("repro", "torch", "transformers", "tokenizers", "datasets", "huggingface_hub", "pyarrow",
                    "papermill", "scipy", "seaborn", "numpy", "pandas", "llm-blender", "vllm")
# whose versions decide a scoring or generation job's numbers, token ids included (its fingerprint: `job_versions`)
JOB_PACKAGES = ("torch", "transformers", "tokenizers")
# what `repro selfcheck` writes (repro.cli.selfcheck); a run cites the latest one (`find_selfcheck`)
SELFCHECK_VERSIONS = ("repro", "torch", "transformers", "tokenizers", "llm-blender")
NOT_FROM_CHECKOUT = "not from a checkout"
NAMING = {"run_name", "run_dir"}  # they name the run's folder and shape nothing: the folder's record keeps its own
# 01_construct's parameters that decide how the work runs and where it keeps rows, not what the data holds (scores
# do not depend on them beyond float rounding; processes give byte-identical rows), nor the run's folder
NOT_SHAPING = frozenset(NAMING | {"batch_tokens", "chunk_size", "num_processes", "generation_batch_size",
                                  "generation_chunk_size", "generation_num_processes", "cache", "cache_dir"})
# of those, the ones whose batches decide the float rounding (a chunk's rows are batched together)
ROUNDING = ("batch_tokens", "chunk_size", "generation_batch_size", "generation_chunk_size")
# a folder's files a model's load does not read (READMEs, licences, dotfiles such as .DS_Store, repro's stand-in marker)
LOAD_SKIPS = re.compile(rf"(^|[/\\])(\.|README|LICENSE)|\.md$|^{re.escape(STAND_IN_MARKER)}$")
OTHER_SELFCHECK = "the self-check it would cite is another"  # (why a complete run is not as it was: `unheld`)
CITES_SELFCHECK = ("03_card",)  # the notebooks that cite the self-check: the rest of a run holds without it
LAST_RUN = {"running": "stopped without finishing (killed?)", "failed": "failed", "interrupted": "was interrupted"}
# what a manifest not in the shape repro writes it in is (records.Manifest), and what to do
NOT_A_RECORD = ("not a run's record: restore it (a copy, version control), or give the run another folder; nothing was "
                "written.")
# what a replaced run keeps (a chunk or cached row is reused only where the values it was made with still hold)
REUSED = ("its work/ stays: changed generation or scoring values make their work again; the rest is reused where "
          "it can be")


def sha256_file(path: str | Path) -> str:
    """The sha256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that decide a run's numbers (None where not installed)."""
    out: dict[str, str | None] = dict.fromkeys(TRACKED_PACKAGES)
    for name in TRACKED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def job_versions(*backend: str) -> dict[str, str | None]:
    """The versions of JOB_PACKAGES and of `backend`'s packages (vllm, llm-blender: only where they do the work)."""
    return {k: v for k, v in package_versions().items() if k in JOB_PACKAGES + backend}


def read_lock(path: str | Path) -> dict[str, str]:
    """The pinned `name==version` lines of a requirements lock, by canonical package name."""
    pins: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line[:1].isalnum() and "==" in line:
            name, _, version = line.split(" ", 1)[0].partition("==")
            pins[canonicalize_name(name.split("[")[0])] = version
    return pins


def _same_version(a: str, b: str | None) -> bool:
    try:
        return b is not None and Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def installed_packages() -> dict[str, tuple[str, list[str]]]:
    """Canonical name -> (version, requirements); of a name installed twice, the copy first on sys.path (imported)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for dist in metadata.distributions():
        meta = dist.metadata
        if meta["Name"] and (name := canonicalize_name(meta["Name"])) not in found:
            # an egg-info keeps them in requires.txt (dist.requires reads either, but parses the metadata again)
            requires = meta.get_all("Requires-Dist") or (dist.read_text("requires.txt") and dist.requires) or []
            found[name] = (meta["Version"], requires)
    return found


def runtime_packages(installed: dict[str, tuple[str, list[str]]] | None = None) -> set[str]:
    """repro's requirements without extras, theirs, and so on as `installed` (default installed_packages()) has them."""
    installed = installed_packages() if installed is None else installed
    needed, todo = set(), ["repro"]
    while todo:
        if (name := canonicalize_name(todo.pop())) in needed:
            continue
        needed.add(name)
        todo += [r.name for r in map(Requirement, installed.get(name, ("", []))[1])
                 if r.marker is None or r.marker.evaluate({"extra": ""})]
    return needed


def lock_status(path: str | Path | None = None, installed: dict[str, str] | None = None) -> dict[str, Any]:
    """The lock's sha256 and each pin installed otherwise; one missing counts only if repro needs it (not dev tools)."""
    path = Path(path) if path else shipped(LOCK_NAME)
    if not path.is_file():
        return {"file": LOCK_NAME, "sha256": None, "locked": False, "differs": [],
                "missing": f"no {LOCK_NAME} beside this installation"}
    lock = read_lock(path)
    # (one pass over the distributions, every notebook's manifest asks; none where every locked version is given)
    environment = installed_packages() if installed is None or lock.keys() - installed.keys() else {}
    if installed is None:
        installed = {name: version for name, (version, _) in environment.items()}
    needed = runtime_packages(environment) if lock.keys() - installed.keys() else set()  # (of a locked one missing)
    differs = [{"package": name, "locked": version, "installed": installed.get(name)}
               for name, version in sorted(lock.items())
               if not _same_version(version, installed.get(name)) and (name in installed or name in needed)]
    return {"file": LOCK_NAME, "sha256": sha256_file(path), "locked": not differs, "differs": differs}


def lock_summary(status: dict[str, Any]) -> str:
    """One line for people: "locked (requirements.lock sha256 …)" or what differs from the lock."""
    if status.get("missing"):
        return f"not checked: {status['missing']}"
    if status["locked"]:
        return f"locked ({status['file']}, sha256 {status['sha256'][:12]})"
    shown = ", ".join(f"{d['package']} {d['installed'] or 'not installed'} (lock: {d['locked']})"
                      for d in status["differs"][:8])
    more = f" and {len(status['differs']) - 8} more" if len(status["differs"]) > 8 else ""
    return f"differs from {status['file']} (sha256 {status['sha256'][:12]}): {shown}{more}"


def _git(root: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=check).stdout.strip()


def git_commit(root: Path | None = None) -> dict[str, Any]:
    """The checkout's commit, whether it is dirty, and its `origin` where public (a wheel: not from a checkout)."""
    root = root or checkout_root()
    if root is None:
        return {"commit": NOT_FROM_CHECKOUT, "dirty": None}
    try:
        return {"commit": _git(root, "rev-parse", "HEAD"),
                "dirty": bool(_git(root, "status", "--porcelain", "--untracked-files=no")),
                "origin": public_remote(_git(root, "remote", "get-url", "origin", check=False))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def git_refusal() -> str | None:
    """Why git refuses to read the checkout (safe.directory: another user owns it, e.g. a Docker bind mount), where it
    does (git_commit then records none); the check stays (it stops the repository's hooks running): the fix is said."""
    if (root := checkout_root()) is None:
        return None
    with contextlib.suppress(OSError):  # (no git: no commit, as git_commit records)
        refused = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stderr
        if said := re.search(r"safe\.directory (.+)", refused):  # (git's command, in any language it speaks)
            return (f"git refuses the checkout at {root} as owned by another user, so the run records no commit (its "
                    f"card says commit unknown): `git config --global --add safe.directory {said[1]}` lets it")
    return None


def committed(paths: list[Path]) -> list[Path]:
    """Those of `paths` committed unchanged (a clone has them); all if repro is no checkout, none if git cannot tell."""
    if (root := checkout_root()) is None:
        return paths
    names = [p.relative_to(root).as_posix() for p in paths]
    try:  # the commit's files, and those that differ from it (staged or not: a clone has neither change)
        tracked, changed = (set(_git(root, *command, "--", *names).splitlines())
                            for command in (["ls-tree", "-r", "--name-only", "HEAD"], ["diff", "--name-only", "HEAD"]))
    except (OSError, subprocess.CalledProcessError):
        return []
    return [p for p, name in zip(paths, names) if name in tracked and name not in changed]


def public_remote(url: str) -> str | None:
    """A git remote as a card may name it: https://host/… less any user:password@ or query (a token), git@host:path;
    else None (a local path, file://, user@host:/path: this machine's, as public_text hides them)."""
    if found := re.fullmatch(r"https://(?:[^@/\s]*@)?([^@/\s]+/[^?#\s]+)(?:[?#]\S*)?", url):
        return f"https://{found[1]}"
    return url if re.fullmatch(r"git@[\w.-]+:(?![/~])\S+", url) else None


def version_line() -> str:
    """What `repro --version` prints: the version, and the checkout's commit or that it is an installed package."""
    checkout = checkout_root()
    if checkout is None:
        return f"repro {__version__} ({NOT_FROM_CHECKOUT}: installed at {Path(__file__).resolve().parent})"
    git = git_commit(checkout)
    dirty = ", with uncommitted changes" if git["dirty"] else ""
    why = f": {refusal}" if git["commit"] is None and (refusal := git_refusal()) else ""
    return f"repro {__version__} (checkout {checkout}, git commit {git['commit']}{dirty}{why})"


def find_selfcheck(run_root: str | Path, given: str | Path | None = None) -> Path | None:
    """`given` (a selfcheck.json or its folder), else the run folder's newest; one not a records.Selfcheck: an error."""
    if given:
        path = Path(resolve_user_path(str(given), may_be_id=False))
        found = path / SELFCHECK_JSON if path.is_dir() else path
        if not found.is_file():
            raise ParameterError(
                f"selfcheck={str(given)!r}: no {SELFCHECK_JSON} there (looked for {found}). Run `repro selfcheck "
                f"--report DIR` first and give DIR or DIR/{SELFCHECK_JSON}, or leave selfcheck unset.")
        _read_selfcheck(found, "selfcheck")
        return found
    root = Path(run_root)
    found = {p: _read_selfcheck(p) for p in [root / SELFCHECK_JSON, *root.glob(f"*/{SELFCHECK_JSON}")] if p.is_file()}
    return max(found, key=lambda p: (str(found[p].get("when", "")), p.stat().st_mtime), default=None)


def _read_selfcheck(path: Path, parameter: str | None = None) -> dict[str, Any]:
    """The selfcheck report at `path`; none: a ParameterError naming `parameter` if given, else a DataError."""
    cited = f"and the run would cite it: run `repro selfcheck --report {path.parent}` again, or delete it."
    fix = "not a report of `repro selfcheck`" + ("" if parameter else f" as it writes one, {cited}")
    try:
        return read_record(path, SELFCHECK, fix, {})
    except (OSError, DataError) as exc:
        if parameter:
            raise ParameterError(f"{parameter}={str(path)!r}: {exc}; run `repro selfcheck --report DIR` and give "
                                 f"DIR.") from None
        if isinstance(exc, OSError):
            raise DataError(f"{path} cannot be read ({exc}), {cited}") from None
        raise


def _same_model(scorer: dict[str, Any] | None, checked: list[dict[str, Any]]) -> bool | None:
    """Whether the self-check loaded the run's scorer (`model_identity`s): True where one is it; False where each is
    known to be another (stand-in vs not, or hub id and commit, or a folder's files, differing beyond a large file's
    date); else None (a hub id vs its snapshot folder). Hub ids compare case-blind, as the Hub; folders by the files
    a load reads (not LOAD_SKIPS): one more README or one less stand-in marker is the same model, other weights not."""
    if not scorer or not checked:
        return None
    read = (lambda i: {k: v.lower() if k == "hub_id" else {f: h for f, h in v.items() if not LOAD_SKIPS.search(f)}
                       if k == "files" else v for k, v in i.items()})
    scorer, checked = read(scorer), [read(c) for c in checked]
    alike = (lambda identity: re.sub(r" mtime=\d+", "", json.dumps(identity, sort_keys=True)))
    other = (lambda c: any(str(i.get("name")).startswith("builtin:") for i in (scorer, c))
             or c.keys() == scorer.keys() and alike(c) != alike(scorer))
    return True if scorer in checked else False if all(map(other, checked)) else None


def same_scoring_code(checked: str | None, code: str | None) -> bool | None:
    """Whether the self-check's scoring code (digest `checked`) is `code` (a score stage's); None if either is
    unrecorded (older repro). Asked again at card time: the rows may have been scored again, by other code, since."""
    return checked == code if checked and code else None


def selfcheck_summary(path: str | Path, scorer: dict[str, Any] | None = None, code: str | None = None
                      ) -> dict[str, Any]:
    """A self-check as a manifest records it: verdict, device, versions, whether its model and scoring code are this
    run's (`scorer`'s model_identity; `code`, the digest that scored the rows; None: unknown), each check, the hash."""
    record = _read_selfcheck(Path(path))
    # (a report from before identities were kept: a built-in's name is its identity)
    checked = [m["identity"] if "identity" in m else {"name": m["spec"]} for m in (record.get("models") or {}).values()
               if "identity" in m or str(m.get("spec")).startswith("builtin:") and not m.get("error")]
    settings, env = record.get("settings") or {}, record.get("environment") or {}
    versions = {k: (env.get("packages") or {}).get(k) for k in SELFCHECK_VERSIONS}
    installed = package_versions()
    return {
        "verdict": record.get("verdict"), "when": record.get("when"), "device": settings.get("device"),
        "gpu": env.get("gpu"), "dtype": settings.get("run_dtype"), "model": settings.get("model_label"),
        "reference_model": settings.get("reference_model_label"), "rows": settings.get("rows"),
        "versions": versions, "same_versions_as_run": all(installed.get(k) == v for k, v in versions.items()),
        "same_model_as_run": _same_model(scorer, checked),
        "scoring_code": env.get("scoring_code"), "same_code_as_run": same_scoring_code(env.get("scoring_code"), code),
        "checks": {c["name"]: c["status"] for c in record.get("checks", [])},
        "not_run": [c["name"] for c in record.get("checks", []) if c.get("status") == "not run"],
        "file": str(path), "sha256": sha256_file(path),
    }


def as_recorded(value: Any) -> Any:
    """`value` as the manifest records it (JSON: tuples as lists, numpy scalars as values, paths as text)."""
    return json.loads(json.dumps(value, default=json_default))


def ended(exc: BaseException) -> str:
    """How a run or notebook stopped by `exc` ends: interrupted (Ctrl-C, a kernel interrupt) or failed."""
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"


def stopped_by(exc: BaseException) -> str:
    """`exc` as a record says it: its class, and its message where it has one (a Ctrl-C has none)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Manifest:
    """Read-modify-write access to one run's `manifest.json`."""

    def __init__(self, run_dir: str | Path | RunDir):
        self.run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.path = self.run.manifest

    def read(self) -> dict[str, Any]:
        return read_record(self.path, MANIFEST, NOT_A_RECORD, {})  # damaged: nothing can be told of what it holds

    def write(self, data: dict[str, Any]) -> None:
        atomic_write_json(self.path, data, indent=2, default=json_default)

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Any]]:
        """The manifest's data to change in place; written back when the block ends."""
        data = self.read()
        yield data
        self.write(data)

    def update(self, **fields: Any) -> None:
        with self.edit() as data:
            data.update(fields)

    def start_run(self, parameters: dict[str, Any], notebooks: list[str], driver: str = "repro run",
                  merge: bool = False) -> None:
        """Mark `running`, record the environment; of an earlier record keep its `subject` only, or with `merge` its
        stages, counts, the parameters of notebooks not run now and, unless 01_construct runs, the data's env."""
        data = self.read()
        was, root = self.project(data), project_root()  # (a project moved or copied: its paths where it is now)
        if not merge:
            data = {key: data[key] for key in ("subject",) if key in data}
        merge = merge and bool(data.get("parameters"))
        # merged: the notebooks that ran (a plan's `pending` ones that never started are not this run's)
        nbs = {k: v for k, v in data.get("notebooks", {}).items() if v.get("status") != "pending"} if merge else {}
        entries: dict[str, dict[str, Any]] = {nb: {"status": "pending"} for nb in notebooks}
        params = rebased(data["parameters"], was, root) if merge else dict(parameters)
        for entry in nbs.values():  # (a notebook's own values)
            if "parameters" in entry:
                entry["parameters"] = rebased(entry["parameters"], was, root)
        if "subject" in data:
            data["subject"] = rebased(data["subject"], was, root)
        if merge:  # (resolved parameters hold every notebook's defaults: only the notebooks run now say theirs)
            others = notebook_fields(*(nb for nb in nbs if nb not in notebooks))
            new = as_recorded(parameters)
            for key in (notebook_fields(*notebooks) | RUN_KEYS) & set(parameters) - NAMING:
                if key in others and key in params and params[key] != new[key]:  # theirs stays; this one's beside
                    for nb in notebooks:
                        if key in notebook_fields(nb):
                            entries[nb].setdefault("parameters", {})[key] = parameters[key]
                else:
                    params[key] = parameters[key]
        environment = {"python": sys.version.split()[0], "repro": __version__, "platform": platform.platform(),
                       "packages": package_versions(), "git": git_commit(), "lock": lock_status()}
        if merge and "01_construct" not in notebooks and data.get("environment") not in (None, environment):
            for entry in entries.values():
                entry["environment"] = environment
            environment = data["environment"]
        nbs.update(entries)
        data.pop("fingerprint", None)  # what the folder holds is this run's to say when it is complete
        data.update(status="running", driver=driver, started=now(), finished=None, error=None, parameters=params,
                    notebooks=nbs, environment=environment, project=str(root))
        for key in ("stages", "counts", "outputs"):  # (01_construct's load counts afresh: `stages.load`)
            data.setdefault(key, {})
        self.write(data)

    def unheld(self, fingerprint: dict[str, Any], selfcheck: str | Path | None = None,
               parameters: dict[str, Any] | None = None) -> str:
        """Why the folder does not hold a complete run of `fingerprint` (`revisions.run_fingerprint` of `parameters`)
        with every output as recorded and the self-check it would cite; "" when it does. A part an older repro did not
        record is unknown, not changed; of a record with no `project` (paths digested as they were), the values tell."""
        data = self.read()
        if data.get("status") != "complete":
            return f"it is {data.get('status') or 'not started'}"
        if not isinstance(recorded := data.get("fingerprint"), dict):
            return "nothing records what made it (a notebook run on its own since, or an older repro)"
        # ("": one of the runs reads none of the part; a part not recorded: an older repro's record, unknown)
        if changed := [part for part, digest in fingerprint.items()
                       if recorded.get(part, digest) != digest and "" not in (digest, recorded[part]) and not (
                           part == "parameters" and parameters is not None and (self.alike(data, parameters) or not
                           data.get("project") and not self.changed_parameters(parameters, parameters["notebooks"])))]:
            changed = [f"{part} ({', '.join(k for k in now if now[k] != was.get(k))})"  # (which hub ids: by name)
                       if isinstance(now := fingerprint[part], dict) and isinstance(was := recorded.get(part), dict)
                       else part for part in changed]
            # other notebooks read other values and inputs (other digests): where no value of a notebook both runs
            # execute changed, the list is what differs (a source changed too: `rerun.source_changed` says so)
            if listed_apart := parameters is not None and (data.get("parameters") or {}).get("notebooks") != \
                    parameters["notebooks"] and not self.changed_parameters(parameters, parameters["notebooks"]):
                changed = [part for part in changed if part in ("code", "packages")]
            said = f"its {' and '.join([', '.join(changed[:-1]), changed[-1]] if changed[1:] else changed)} changed"
            return f"its notebook list differs{' and ' + said if changed else ''}" if listed_apart else said
        for relative, out in self.outputs(data).items():
            if not (self.run.root / relative).is_file() or sha256_file(self.run.root / relative) != out.get("sha256"):
                return f"its output {relative} is gone or was changed"
        cited = find_selfcheck(self.run.root, selfcheck)  # (a run without the card cites none)
        if (data.get("selfcheck") or {}).get("sha256") != (cited and sha256_file(cited)) and any(
                nb in CITES_SELFCHECK for nb in data.get("notebooks") or {}):
            return OTHER_SELFCHECK
        return ""

    def changed_parameters(self, parameters: dict[str, Any], notebooks: Collection[str],
                           ignore: Collection[str] = NOT_SHAPING) -> dict[str, tuple[Any, Any]]:
        """{name: (recorded, new)} of each differing parameter, not in `ignore`, of `notebooks` the recorded run ran too
        (a failed one binds nothing, but 01_construct's finished work does); where it acts in either (`differing`)."""
        data = self.read()
        done = {name: entry for name, entry in (data.get("notebooks") or {}).items()
                if entry.get("status") != "failed" or name == "01_construct"}
        new, recorded = as_recorded(parameters), self.recorded(data)
        changed = {}
        for name in (name for name in notebooks if name in done):
            theirs = {**recorded, **self.recorded(data, done[name])}
            changed.update(differing(theirs, new, notebook_fields(name) & set(theirs) & set(new) - set(ignore)))
        return dict(sorted(changed.items()))

    def alike(self, data: dict[str, Any], parameters: dict[str, Any]) -> bool:
        """Whether `data`'s fingerprinted values differ from `parameters` only as `differing` allows (idle)."""
        recorded, new = self.recorded(data), as_recorded(parameters)
        hashed = (notebook_fields(*parameters["notebooks"]) | RUN_KEYS) - NOT_SHAPING - unused_generation(recorded, new)
        return any(recorded.get(k) != new.get(k) for k in hashed) and not differing(recorded, new, hashed)

    def project(self, data: dict[str, Any]) -> Path:
        """The project root the paths of the record `data` were taken from (`paths.record_project`)."""
        return record_project(data, self.run.root)

    def recorded(self, data: dict[str, Any], entry: dict[str, Any] | None = None) -> dict[str, Any]:
        """The parameters the record `data` holds (`entry`'s: a notebook's own), `rebased` to where the project is."""
        return rebased((data if entry is None else entry).get("parameters") or {}, self.project(data), project_root())

    def _under_repro_run(self, notebook: str) -> bool:
        data = self.read()  # (a `running` one no other process holds, of no `repro run` here, was killed: `last_run`)
        return (data.get("status") == "running" and data.get("driver") == "repro run"
                and notebook in data.get("notebooks", {}) and (self.run.writer() is not None or self.run.driven()))

    def last_run(self) -> str | None:
        """How an incomplete run ended, in LAST_RUN's words (`running`, no RunDir.writer: killed?); None: held/done."""
        status = self.read().get("status")
        return None if status == "running" and self.run.writer() is not None else LAST_RUN.get(status)

    def outputs(self, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """The outputs `data` (else the manifest) names inside the run; one elsewhere (a copied run's) is skipped."""
        outputs = (data or self.read()).get("outputs")
        return {k: v for k, v in outputs.items() if within(k, self.run.root)} if isinstance(outputs, dict) else {}

    def made_results(self) -> bool:
        """Whether the recorded run made anything but executed notebooks (else nothing to keep; work/ stays anyway)."""
        return bool(self.run.shards()) or any(Path(self.run.relative(self.run.root / k)).parts[0] !=
                                              self.run.notebooks.name for k in self.outputs())

    def refuse_other_parameters(self, parameters: dict[str, Any], notebook: str) -> dict[str, tuple[Any, Any]]:
        """A notebook on its own (papermill, JupyterLab) refuses a run of other parameters there, as `repro run`;
        one that made nothing but its notebooks is replaced: its changed parameters (`ensure_started` replaces it)."""
        if self._under_repro_run(notebook) or not (changed := self.changed_parameters(parameters, [notebook])):
            return {}
        if not self.made_results():
            return changed
        raise ParameterError(
            f"run_dir {str(self.run.root)!r} holds a run with other parameters: {listed(changed)}. Set those values in "
            f"the parameters cell to continue it (a notebook's defaults are its own, not a params file's: "
            f"`repro run PARAMS` runs a file), give this notebook another run_dir, or remove that folder to "
            f"replace its run (`repro run PARAMS --out DIR --force` does so and keeps its resumable work/); nothing "
            f"was written.")

    def ensure_started(self, parameters: dict[str, Any], notebook: str,
                       replacing: dict[str, tuple[Any, Any]] | None = None, ours: bool = False) -> bool:
        """Mark `notebook` running; alone (papermill, JupyterLab), first join its parameters and environment to the
        record, or start anew if `replacing` (refuse_other_parameters; `ours`: this process's). Whether alone."""
        alone, status = not self._under_repro_run(notebook), self.read().get("status")
        if alone and replacing:
            last = "did not finish (this kernel was running it)" if ours and status == "running" else \
                LAST_RUN.get(status, "made nothing but its notebooks")
            notice(f"The run in {self.run.root} is replaced: it {last}, and its parameters changed "
                   f"({listed(replacing)}); {REUSED}.")
        elif alone and notebook == "01_construct" and status in ("complete", "failed", "interrupted"):
            notice(f"The run in {self.run.root} continues (same parameters): it {LAST_RUN.get(status, 'completed')}; "
                   f"its stages run again, reusing what its work/ and the row cache hold, and write its outputs anew.")
        if alone:
            self.start_run(parameters, [notebook], driver="papermill", merge=not replacing)
        self.notebook_status(notebook, "running")
        return alone

    @contextlib.contextmanager
    def notebook(self, parameters: dict[str, Any], notebook: str) -> Iterator[None]:
        """A notebook's work, recorded as `ensure_started` says; on its own, `done` at the end (a failed stage fails
        it); under `repro run`, which says when the whole notebook is done (later cells may still read `running`)."""
        alone = self.ensure_started(parameters, notebook)
        try:
            yield
        except BaseException as exc:  # outside a stage (a stage has recorded its own failure)
            if alone and self.read()["notebooks"][notebook].get("status") == "running":
                self.notebook_ended(notebook, ended(exc), stopped_by(exc))
            raise
        if alone:
            self.notebook_ended(notebook)

    def record_selfcheck(self, given: str | Path | None = None, scorer: Callable[[], dict[str, Any]] | None = None,
                         code: Callable[[], str | None] | None = None) -> dict[str, Any] | None:
        """Record under `selfcheck` the cited self-check (find_selfcheck), `scorer`, `code` (called only if one is)."""
        found = find_selfcheck(self.run.root, given)
        with self.edit() as data:
            data.pop("selfcheck", None)
            if found is not None:
                data["selfcheck"] = selfcheck_summary(found, scorer and scorer(), code and code())
        return data.get("selfcheck")

    def notebook_status(self, notebook: str, status: str, **extra: Any) -> None:
        with self.edit() as data:
            data.setdefault("notebooks", {}).setdefault(notebook, {}).update({"status": status, "at": now(), **extra})

    def finish_run(self, status: str, error: str | None = None) -> None:
        """Close the run as `complete` or `failed` (with the error paragraph, which a running notebook shares)."""
        with self.edit() as data:
            data.update(status=status, finished=now(), error=error)
            for entry in [*(data.get("notebooks") or {}).values(), *(data.get("stages") or {}).values()]:
                if status != "complete" and entry.get("status") == "running":  # (a stage: its kernel died)
                    entry.update(status=status, error=error)
        self.run.release(kernel=True)  # a notebook on its own ends its run here

    def notebook_ended(self, notebook: str, status: str = "done", error: str | None = None) -> None:
        """End a notebook: done, failed or interrupted; a run driven by plain papermill ends when none of its
        notebooks is left to finish: complete when all are done, else as the first that is not, with its error."""
        self.notebook_status(notebook, status, **({"error": error} if error else {}))
        data = self.read()
        entries = list((data.get("notebooks") or {}).values())
        if data.get("driver") == "papermill" and data.get("status") == "running" and not any(
                e.get("status") in ("running", "pending") for e in entries):
            stopped = next((e for e in entries if e.get("status") != "done"), None)
            self.finish_run("complete" if stopped is None else "interrupted" if stopped.get("status") == "interrupted"
                            else "failed", stopped and stopped.get("error"))
        self.run.release(kernel=True)  # a notebook on its own gives the run directory back when it ends

    @contextlib.contextmanager
    def stage(self, name: str, resumable: bool = True) -> Iterator[dict[str, Any]]:
        """Time one stage, storing the yielded dict's items with it; `resumable`: a run again continues its chunks."""
        info: dict[str, Any] = {}
        t0 = time.perf_counter()
        self._set_stage(name, {"status": "running", "started": now()})
        try:
            yield info
        except BaseException as exc:
            error = stopped_by(exc)
            self._set_stage(name, {"status": ended(exc), "seconds": round(time.perf_counter() - t0, 3),
                                   "error": error, **info})
            self.finish_run(ended(exc), error=f"stage {name!r} {ended(exc)}: {error}")
            if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Interrupted):
                raise Interrupted(f"stage {name!r}: {safe_chunks(self.run.work)}; run the notebook again to "
                                  f"continue." if resumable else
                                  f"stage {name!r} was stopped, and keeps nothing to continue from: run the notebook "
                                  f"again.") from None
            raise
        self._set_stage(name, {"status": "done", "seconds": round(time.perf_counter() - t0, 3), **info})

    def _set_stage(self, name: str, value: dict[str, Any]) -> None:
        with self.edit() as data:
            data.setdefault("stages", {})[name] = value

    def set_counts(self, **counts: int) -> None:
        """Row counts at each stage (source, sliced, dropped, scored, kept, ...)."""
        with self.edit() as data:
            data.setdefault("counts", {}).update(counts)

    def record(self, key: str, value: Any) -> None:
        """Store a top-level fact (`scorer`, `generation`) for later notebooks and the card."""
        self.update(**{key: value})

    def remove_outputs(self, *paths: Path) -> None:
        """Delete earlier output files and their records: a stage that fails must leave none that look current."""
        for path in paths:
            path.unlink(missing_ok=True)
        if self.path.exists():
            with self.edit() as data:
                for path in paths:
                    (data.get("outputs") or {}).pop(self.run.relative(path), None)

    def add_outputs(self, *paths: str | Path) -> None:
        """Record sha256 and size of output files, keyed by their path relative to the run directory."""
        with self.edit() as data:
            outputs = data.setdefault("outputs", {})
            for p in map(Path, paths):
                rel = self.run.relative(p) if p.is_absolute() or p.exists() else str(p)
                outputs[rel] = {"sha256": sha256_file(p), "bytes": p.stat().st_size}
