"""requirements.lock: it agrees with pyproject.toml, and a run knows whether its packages are the lock's."""

import hashlib
import os
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from repro.manifest import lock_status, lock_summary, read_lock, runtime_packages

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"


def _lock_entries() -> dict[str, list[str]]:
    """Each pinned line of the lock with the lines that follow it (hashes, 'via' comments), parsed independently."""
    entries: dict[str, list[str]] = {}
    current = None
    for line in LOCK.read_text().splitlines():
        if line[:1].isalnum():
            current = line.split()[0]
            entries[current] = []
        elif current and line.strip().startswith("--hash=sha256:"):
            entries[current].append(line.strip())
    return entries


def test_every_pyproject_dependency_is_pinned_in_the_lock_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    pins = {canonicalize_name(k.split("==")[0]): k.split("==")[1] for k in _lock_entries()}
    missing = [str(r) for r in wanted if canonicalize_name(r.name) not in pins]
    assert not missing, f"not in requirements.lock: {missing}; run `make lock`"
    outside = [f"{r} (lock: {pins[canonicalize_name(r.name)]})" for r in wanted
               if not r.specifier.contains(Version(pins[canonicalize_name(r.name)]), prereleases=True)]
    assert not outside, f"the lock's pin is outside pyproject.toml's range: {outside}; run `make lock`"


def test_the_lock_pins_every_package_with_hashes_for_python_3_11_and_the_cpu_torch():
    entries = _lock_entries()
    assert len(entries) > 100  # the whole environment, not only the direct dependencies
    assert all("==" in name for name in entries)
    unhashed = [name for name, hashes in entries.items() if not hashes]
    assert not unhashed, f"pinned without a hash: {unhashed}"
    assert "torch==2.13.0+cpu" in entries  # the CPU build: never a multi-GB CUDA build on a CPU machine
    assert "make lock" in LOCK.read_text().splitlines()[1]  # how to refresh it, as its header says
    assert not any(name.startswith(("nvidia-", "triton==")) for name in entries)


def test_read_lock_gives_the_pins_by_canonical_name():
    pins = read_lock(LOCK)
    assert pins == {canonicalize_name(k.split("==")[0]): k.split("==")[1] for k in _lock_entries()}
    assert pins["pyyaml"] == _lock_version("PyYAML")


def _lock_version(name: str) -> str:
    return next(k.split("==")[1] for k in _lock_entries() if canonicalize_name(k.split("==")[0]) == canonicalize_name(name))


def test_lock_status_names_each_package_that_differs_from_the_lock(tmp_path):
    numpy, yaml_version = metadata.version("numpy"), metadata.version("pyyaml")
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"numpy=={numpy} \\\n    --hash=sha256:00\npyyaml==0.0.1 \\\n    --hash=sha256:11\n"
                    "not-a-real-package-xyz==1.0 \\\n    --hash=sha256:22\n")
    status = lock_status(lock)
    assert status["sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert status["locked"] is False
    # a locked package that is not installed and that repro does not need (the lock's dev tools, for a wheel user:
    # every run listed 13 of them as differences) is no difference; a needed one is
    assert status["differs"] == [{"package": "pyyaml", "locked": "0.0.1", "installed": yaml_version}]
    needed = runtime_packages()
    assert {"torch", "datasets", "papermill", "pyarrow", "numpy"} <= needed and not {"pytest", "playwright"} & needed
    lock.write_text("pyyaml==0.0.1 \\\n    --hash=sha256:11\n")
    status = lock_status(lock, installed={"numpy": numpy})
    assert status["differs"] == [{"package": "pyyaml", "locked": "0.0.1", "installed": None}]
    assert lock_summary(status).endswith("pyyaml not installed (lock: 0.0.1)")
    lock.write_text(f"numpy=={numpy} \\\n    --hash=sha256:00\n")
    assert lock_status(lock)["locked"] is True
    assert lock_summary(lock_status(lock)).startswith("locked (requirements.lock, sha256 ")
    assert lock_status(tmp_path / "none.lock")["missing"]


def test_this_environment_against_the_lock_as_the_manifest_records_it():
    status = lock_status()
    assert status["sha256"] == hashlib.sha256(LOCK.read_bytes()).hexdigest()
    mismatched = []
    for line in _lock_entries():
        name, version = line.split("==")
        try:
            if Version(metadata.version(name)) != Version(version):
                mismatched.append(name)
        except metadata.PackageNotFoundError:
            if canonicalize_name(name) in runtime_packages():
                mismatched.append(name)
    assert status["locked"] == (not mismatched)
    assert sorted(d["package"] for d in status["differs"]) == sorted(canonicalize_name(n) for n in mismatched)
    if os.environ.get("REPRO_EXPECT_LOCKED") == "1":  # .ci/run: `make install` must have installed exactly the lock
        assert status["locked"], lock_summary(status)


def _runtime_packages_one_lookup_each() -> set[str]:
    """runtime_packages as it was first written: metadata.requires of each package, found anew on sys.path."""
    needed, todo = set(), ["repro"]
    while todo:
        if (name := canonicalize_name(todo.pop())) in needed:
            continue
        needed.add(name)
        try:
            todo += [r.name for r in map(Requirement, metadata.requires(name) or [])
                     if r.marker is None or r.marker.evaluate({"extra": ""})]
        except metadata.PackageNotFoundError:
            pass
    return needed


def test_lock_status_reads_each_installed_distributions_metadata_once(monkeypatch):
    # every notebook's manifest asks it: it parsed ~650 metadata files (0.23 s CPU) for ~165 installed distributions
    distributions = len(list(metadata.distributions()))
    reads = []
    read_text = metadata.PathDistribution.read_text
    monkeypatch.setattr(metadata.PathDistribution, "read_text",
                        lambda self, filename: reads.append(filename) or read_text(self, filename))
    status = lock_status()
    assert 0 < reads.count("METADATA") <= distributions
    assert status["sha256"] == hashlib.sha256(LOCK.read_bytes()).hexdigest()
    assert runtime_packages() == _runtime_packages_one_lookup_each()


def test_a_package_installed_twice_is_checked_in_the_copy_python_imports(tmp_path, monkeypatch):
    for folder, version in (("first", "1.0"), ("shadowed", "2.0")):
        info = tmp_path / folder / f"shadowed_pkg_xyz-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: shadowed-pkg-xyz\nVersion: {version}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "shadowed"))
    monkeypatch.syspath_prepend(str(tmp_path / "first"))
    assert metadata.version("shadowed-pkg-xyz") == "1.0"
    lock = tmp_path / "requirements.lock"
    lock.write_text("shadowed-pkg-xyz==1.0 \\\n    --hash=sha256:00\n")
    assert lock_status(lock)["differs"] == []


def test_lock_status_of_given_versions_reads_no_installed_distribution(tmp_path, monkeypatch):
    # given every locked package's version, it still parsed every installed distribution's metadata (for the
    # packages repro needs, which matter only where a locked one is not installed); now only where one is missing
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.0.0 \\\n    --hash=sha256:00\npyyaml==6.0 \\\n    --hash=sha256:11\n")
    reads = []
    read_text = metadata.PathDistribution.read_text
    monkeypatch.setattr(metadata.PathDistribution, "read_text",
                        lambda self, filename: reads.append(filename) or read_text(self, filename))
    status = lock_status(lock, installed={"numpy": "2.0.0", "pyyaml": "5.4"})
    assert status["differs"] == [{"package": "pyyaml", "locked": "6.0", "installed": "5.4"}] and reads == []
    status = lock_status(lock, installed={"numpy": "2.0.0"})  # pyyaml missing: whether repro needs it is read
    assert status["differs"] == [{"package": "pyyaml", "locked": "6.0", "installed": None}] and reads
