"""Pinned hub revisions (a model at one loads from its snapshot folder: every later load reads that commit), what
identifies a model's weights, at its revision (`model_identity`); what a complete run holds (`run_fingerprint`)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import huggingface_hub  # (its downloads looked up at each use: what a test or a mirror's set-up replaces)
from huggingface_hub import constants, try_to_load_from_cache
from huggingface_hub.errors import LocalEntryNotFoundError

from .errors import ModelLoadError, ParameterError
from .jobs import fingerprint_of
from .manifest import NOT_SHAPING, ROUNDING, package_versions, sha256_file
from .parameters import NOTEBOOK_SECTIONS, RUN_KEYS, notebook_fields, unused_generation
from .paths import DEMO, is_hub_id, project_root, rebased, shipped

# the revision (a commit, or a tag or branch, which moves) a hub id is read at; where a card is published: not read
REVISION_OF = {"source": "source_revision", "policy_model": "policy_revision", "scorer_model": "scorer_revision"}
HUB_OUTPUTS = frozenset({"hub_repo_id"})
# the code that computes the scores, and the code that makes the texts (a stand-in's weights too): work and rows the
# code before a change made are made again, not served (`python_digest` in their fingerprints and row cache keys)
_PACKAGE = Path(__file__).parent
SCORING_CODE = (_PACKAGE / "scorers", _PACKAGE / "construct" / "scoring.py")
GENERATION_CODE = (_PACKAGE / "construct" / "generation.py", _PACKAGE / "scorers" / "tiny_policy.py")
# Python 3.11's ast.parse counts its depth in one place for all threads: two threads of one process parsing at once
# (a garbage collection switching between them mid-parse) fail "AST constructor recursion depth mismatch" (CI saw it
# with two runs generating in one process). One parse at a time.
_PARSING = threading.Lock()


def revision_of(parameter: str, values: dict[str, Any]) -> str | None:
    """The revision the hub id `parameter` names is read at (REVISION_OF); scorer_prompt_tokenizer naming policy_model
    is read at policy_revision (SPPO's rank.py templates with the policy's own tokenizer: one commit for both)."""
    tokenizer = values.get("scorer_prompt_tokenizer")
    if parameter == "scorer_prompt_tokenizer" and tokenizer and tokenizer == values.get("policy_model"):
        parameter = "policy_model"
    return values.get(REVISION_OF.get(parameter, ""))


def hub_offline(*also: str) -> str | None:
    """The variable that switches the hub off (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE or one of `also`, set true as
    huggingface_hub reads it, now or when huggingface_hub was imported); None when the hub may be asked."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", *also):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return name
    return "HF_HUB_OFFLINE" if constants.HF_HUB_OFFLINE else None


def publish_blocker() -> str | None:
    """Why nothing can be uploaded to the hub from here (it is switched off, no token), with what to do; else None."""
    if switch := hub_offline():
        return f"the Hugging Face hub is switched off ({switch} is set): unset {switch} on a machine with network"
    if not huggingface_hub.get_token():
        return ("no Hugging Face token was found (HF_TOKEN or `hf auth login`): log in with `hf auth login` (a token "
                "with write access)")
    return None


def check_revision_target(spec: str | None, revision: str | None, parameter: str, target: str) -> None:
    """A revision needs a hub id: refuse it for a local path, a built-in stand-in or an unset model."""
    if revision is not None and (not spec or spec.startswith("builtin:") or spec == DEMO
                                 or Path(spec).expanduser().exists()):
        raise ParameterError(
            f"{parameter}={revision!r} pins a hub commit, but {target}={spec!r} is not a hub id (a local file or "
            f"folder, a built-in stand-in, or unset) and has no revisions: set {parameter}: null, or name the hub id.")


def pinned_model(spec: str, revision: str | None, parameter: str, target: str) -> str:
    """`spec` itself without a revision; else the local snapshot folder of hub model `spec` at `revision`."""
    if revision is None:
        return spec
    check_revision_target(spec, revision, parameter, target)
    try:
        return huggingface_hub.snapshot_download(spec, revision=revision)
    except Exception as exc:  # offline, unknown repo or revision: one message saying what to do
        raise ModelLoadError(
            f"Could not fetch {target}={spec!r} at {parameter}={revision!r} ({type(exc).__name__}: {str(exc)[:300]}). "
            f"Check the commit on the hub; offline, run `hf download {spec} --revision {revision}` where there is "
            f"network and copy the hub cache here (HF_HOME), or give the downloaded folder with {parameter}: null."
        ) from None


def _file_identity(path: Path) -> str:
    stat = path.stat()  # hashing gigabytes on every call is slow; size + mtime catches a replaced file
    return sha256_file(path) if stat.st_size <= 64 << 20 else f"size={stat.st_size} mtime={stat.st_mtime_ns}"


def local_content(value: str) -> dict[str, Any] | None:
    """The `model_identity` of the local file or folder an absolute parameter value names; else None (demo, hub ids)."""
    return model_identity(value) if Path(value).is_absolute() and Path(value).exists() else None


def _notebook_code(path: Path) -> bytes:
    """A notebook's code cells and their tags: not the outputs, counts and metadata JupyterLab saves as it runs, nor
    the parameters cell's values (`repro run` injects every one: a person edits them in JupyterLab)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (ValueError, KeyError, TypeError):  # not a notebook nbformat reads: its bytes
        return path.read_bytes()
    return json.dumps([(c.get("source"), c.get("metadata", {}).get("tags")) for c in cells
                       if c.get("cell_type") == "code" and "".join(c.get("source") or "").strip()
                       and "parameters" not in c.get("metadata", {}).get("tags", [])]).encode()


def code_digest() -> str:
    """sha256 of the package's files and its notebooks' code, whatever its version says; not of bytecode, hidden files
    (JupyterLab's checkpoints), what JupyterLab saves of a run, empty cells, nor copies (File > Duplicate)."""
    digest = hashlib.sha256()
    for folder in (_PACKAGE, shipped("notebooks")):
        for path in sorted(folder.rglob("*")):
            inside = path.relative_to(folder).parts
            if path.suffix == ".ipynb" and path.stem not in NOTEBOOK_SECTIONS:
                continue
            if path.is_file() and not any(part == "__pycache__" or part.startswith(".") for part in inside):
                code = _notebook_code(path) if path.suffix == ".ipynb" else path.read_bytes()
                digest.update(f"{'/'.join(inside)}\0{len(code)}\0".encode() + code)
    return digest.hexdigest()[:16]


def python_digest(*paths: Path) -> str:
    """sha256 of the Python code in `paths` (files, and folders' .py files) as the interpreter reads it: not its
    docstrings, comments nor layout, which decide no number (a row cache keeps its rows across such edits)."""
    digest = hashlib.sha256()
    for path in paths:
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            source = file.read_bytes()
            with _PARSING:
                tree = ast.parse(source)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        node.body and isinstance(first := node.body[0], ast.Expr) and \
                        isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                    node.body = node.body[1:] or [ast.Pass()]
            name = file.relative_to(path).as_posix() if path.is_dir() else file.name
            digest.update(f"{name}\0{ast.unparse(tree)}\0".encode())
    return digest.hexdigest()[:16]


def hub_snapshot(repo_id: str, revision: str | None = None, repo_type: str = "dataset") -> Path | None:
    """The folder of a hub repository in the local hub cache (where `hf download` puts it), or None."""
    try:
        return Path(huggingface_hub.snapshot_download(repo_id, repo_type=repo_type, revision=revision,
                                                      local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def hub_commit(spec: str, revision: str | None = None, repo_type: str = "dataset") -> str | None:
    """The commit of hub repository `spec` (at `revision`, else the newest) in the local hub cache, which a load reads
    (online too: it downloads into that cache); None for a local path, the demo rows, or one not cached."""
    return cached.name if is_hub_id(spec) and (cached := hub_snapshot(spec, revision, repo_type)) else None


def strings_in(value: Any, where: str) -> dict[str, str]:
    """Each string in a parameter's value, in its lists and mappings too, by where it stands."""
    if isinstance(value, str):
        return {where: value}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return {k: v for key, item in items for k, v in strings_in(item, f"{where}.{key}").items()}


def _read(resolved: dict[str, Any]) -> set[str]:
    """The parameters a run's notebooks read (generation's only where it generates)."""
    return (notebook_fields(*resolved["notebooks"]) | RUN_KEYS) - unused_generation(resolved)


def shaping(resolved: dict[str, Any]) -> dict[str, Any]:
    """The parameters a run's outputs depend on: those its notebooks read, but where it lives and how it runs."""
    read = _read(resolved)
    return {k: v for k, v in resolved.items() if k in read and k not in NOT_SHAPING}


def hub_commits(resolved: dict[str, Any]) -> dict[str, str] | str:
    """{parameter: commit} per hub id the run reads, at its revision (else newest), in the local hub cache, as a dataset
    else a model (the id does not say); "" where it reads none or one is not cached (first run): nothing to compare."""
    parameters = shaping(resolved)
    commits = {where: hub_commit(spec, revision := revision_of(key, resolved), "dataset")
               or hub_commit(spec, revision, "model")
               for key, value in parameters.items() if key not in HUB_OUTPUTS
               for where, spec in strings_in(value, key).items() if is_hub_id(spec)}
    return commits if commits and all(commits.values()) else ""


def run_fingerprint(resolved: dict[str, Any]) -> dict[str, Any]:
    """What a complete run of these parameters holds, a digest each: every parameter its notebooks read (generation's
    where it generates) but where it lives and how the work runs; the batch sizes (they decide the rounding; "" where
    it reads none); the content of each local file or folder named (a source rewritten in place is other data); the
    commit of each hub id (`hub_commits`), the code (`code_digest`) and the packages that decide the numbers."""
    parameters = shaping(resolved)
    local = {where: content for key, value in parameters.items() for where, spec in strings_in(value, key).items()
             if (content := local_content(spec))}
    batches = {k: resolved[k] for k in ROUNDING if k in _read(resolved)}
    inside = rebased(parameters, project_root(), "<project>")  # (a project moved or copied: the same parameters)
    return {"parameters": fingerprint_of(inside), "batch sizes": fingerprint_of(batches) if batches else "",
            "local inputs": fingerprint_of(local), "hub commits": hub_commits(resolved), "code": code_digest(),
            "packages": fingerprint_of(package_versions())}


def model_identity(model: str, revision: str | None = None) -> dict[str, Any]:
    """What identifies a checkpoint for reuse of old work: its files' hashes (size and mtime beyond 64 MiB; not the
    metadata `hf download --local-dir` rewrites in .cache/huggingface/), else the hub commit at `revision` (else main;
    its config fetched if not cached, as a load would: a first run's work is a re-run's), else its name."""
    path = Path(model).expanduser()
    if path.is_file():  # a local input (a source's jsonl): the same rule as a checkpoint's files
        return {"file": _file_identity(path)}
    if path.is_dir():
        return {"files": {str(f.relative_to(path)): _file_identity(f) for f in sorted(path.rglob("*"))
                          if f.is_file() and f.relative_to(path).parts[:2] != (".cache", "huggingface")}}
    try:
        cached = try_to_load_from_cache(model, "config.json", revision=revision)
        if not isinstance(cached, str) and not hub_offline():
            cached = huggingface_hub.hf_hub_download(model, "config.json", revision=revision)
    except Exception:  # not a hub id ("builtin:..."), unknown or unreachable: the name; the loader says what to do
        cached = None
    return {"hub_id": model, "commit": Path(cached).parent.name} if isinstance(cached, str) else {"name": model}
