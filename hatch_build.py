"""Build hook: a wheel carries copies of notebooks/*.ipynb, params/**/*.yaml and requirements.lock under
repro/_bundled/.

The repository keeps one copy of each at its top level; an editable install (a checkout) reads them there,
so the hook adds nothing to it.
"""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# top-level folder -> the files of it that `repro run` and `repro notebooks` use, and the lock the manifest
# compares the installed packages with
BUNDLED = {"notebooks": "*.ipynb", "params": "**/*.yaml", ".": "requirements.lock"}  # params/recipes/ too


class BundleHook(BuildHookInterface):
    """Force-includes the notebooks and example params into the wheel's package."""

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        for folder, pattern in BUNDLED.items():
            files = sorted((Path(self.root) / folder).glob(pattern))
            if not files:
                raise RuntimeError(f"{folder}/{pattern} matches no file in {self.root}: nothing to bundle")
            for path in files:
                build_data["force_include"][str(path)] = f"repro/_bundled/{path.relative_to(self.root)}"
