"""`repro notebooks DIR`: a project folder of one's own, with copies of the notebooks, the example params files and
the recipes, to open in JupyterLab; relative paths in its notebooks' parameters then mean DIR (see repro.paths)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path
from typing import Any

from ..errors import ReproError, counted, notice
from ..paths import PROJECT_MARKER, check_folder, shipped
from .run import ensure_kernel

MARKER_TEXT = ("This folder is a repro project (made by `repro notebooks`): relative paths given to the notebooks'\n"
               "parameters mean this folder, and runs go to runs/<name>/ here.\n")


def make_project(folder: str | Path, force: bool = False) -> list[Path]:
    """Copy notebooks/*.ipynb and params/ (recipes too) into `folder` and mark it a project; the files written."""
    root = Path(folder).expanduser().resolve()
    plan = [(src, root / "notebooks" / src.name) for src in sorted(shipped("notebooks").glob("*.ipynb"))]
    params = shipped("params")
    plan += [(src, root / "params" / src.relative_to(params)) for src in sorted(params.glob("**/*.yaml"))]
    if any(dst.exists() and dst.samefile(src) for src, dst in plan):  # (the checkout itself: nothing to copy)
        raise ReproError(f"{root} is the folder these notebooks and params are copied from: open them there (cd "
                         f"{shlex.quote(str(root))} && jupyter lab), or give another folder for a project of your own.")
    for folder in sorted({dst.parent for _, dst in plan}):
        check_folder(folder, "The folder", "Give a new or existing folder for the notebooks (repro notebooks DIR).")
    data, emptied = {dst: src.read_bytes() for src, dst in plan}, []
    for dst in [dst for dst in data if dst.suffix == ".ipynb"]:
        if strip_outputs(nb := json.loads(data[dst])):  # (a run saved in the package's notebooks folder)
            data[dst] = (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()
            emptied.append(dst.name)
    changed = [dst for dst in data if dst.exists() and dst.read_bytes() != data[dst]]
    if changed and not force:
        differ, them = ("differs", "it") if len(changed) == 1 else ("differ", "them")
        raise ReproError(
            f"{counted(len(changed), 'file')} in {root} {differ} from this package's copies and would be overwritten: "
            + ", ".join(str(p) for p in changed) + f". Choose another folder, or pass --force to overwrite {them}.")
    for dst, content in data.items():
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(content)
    (root / PROJECT_MARKER).write_text(MARKER_TEXT)
    for name in emptied:
        notice(f"{name}: copied without a run's outputs and papermill's parameters and metadata (a run saved them "
               f"in {shipped('notebooks')})")
    return list(data)


def strip_outputs(nb: dict[str, Any]) -> bool:
    """Empty every code cell's outputs and drop what a papermill run adds (its cells, its and nbclient's metadata,
    language_info but its name), as the package ships a notebook; whether any were there."""
    before = json.dumps(nb)
    added = {"injected-parameters", "papermill-error-cell-tag"}
    nb["cells"] = [cell for cell in nb.get("cells", ()) if not added & set(cell.get("metadata", {}).get("tags", ()))]
    nb.get("metadata", {}).pop("papermill", None)
    if isinstance(language := nb.get("metadata", {}).get("language_info"), dict) and "name" in language:
        nb["metadata"]["language_info"] = {"name": language["name"]}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {})
        for key in ("papermill", "execution") + (("tags",) if meta.get("tags") == [] else ()):
            meta.pop(key, None)
        if cell.get("cell_type") == "code":
            cell.update(outputs=[], execution_count=None)
    return json.dumps(nb) != before


def pre_save_hook(model: dict[str, Any], path: str, **_: Any) -> None:
    """`make lab`'s pre_save_hook: the checkout's notebooks/ saved as strip_outputs leaves them, others as they are."""
    if model.get("type") == "notebook" and path.strip("/").startswith("notebooks/"):
        strip_outputs(model["content"])


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="the folder to create or fill (its notebooks/ and params/)")
    parser.add_argument("--force", action="store_true", help="overwrite copies you have changed")


def main(args: argparse.Namespace) -> int:
    written = make_project(args.folder, force=args.force)
    folder = Path(args.folder).expanduser().resolve()
    root = shlex.quote(str(folder))  # (pasted into a shell)
    ensure_kernel()  # the notebooks' kernel, for JupyterLab and plain papermill too
    print(f"repro notebooks: {len(written)} files in {folder}\n"
          f"  open them: cd {root} && jupyter lab --KernelManager.transport_encryption=auto"
          f"{' --allow-root' if os.geteuid() == 0 else ''}     (kernel 'Python (repro)': this environment)\n"
          f"  run a copy as it is now: cd {root} && papermill notebooks/01_construct.ipynb out.ipynb -f "
          f"params/demo.yaml\n"
          f"  or the package's notebooks on these params: cd {root} && repro run params/demo.yaml     (writes "
          f"runs/demo/ there; repro run executes the package's notebooks, not edited copies)")
    return 0
