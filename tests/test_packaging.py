"""The wheel is the library alone, and it says what it needs to run.

Built from a copy of the sources that packaging reads, so the test neither writes into the repository
nor depends on what an earlier build left there.
"""

import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _runtime_requirements() -> list[Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [Requirement(line) for line in (raw.strip() for raw in lines) if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("personalq", "app"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
    )
    (built,) = out.glob("personalq-*.whl")
    return zipfile.ZipFile(built)


def test_wheel_holds_only_the_personalq_package(wheel):
    top_levels = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top_levels == {"personalq"}
    assert "personalq/cli.py" in wheel.namelist()
    # Opening a catalog runs its migrations from the installed package: every file of them must be in it.
    migrations = (ROOT / "personalq/store/migrations").rglob("*")
    shipped = {p.relative_to(ROOT).as_posix() for p in migrations if p.is_file() and "__pycache__" not in p.parts}
    assert "personalq/store/migrations/versions/0001_catalog_before_migrations.py" in shipped
    assert shipped <= set(wheel.namelist())


def test_wheel_metadata_lists_every_runtime_dependency(wheel):
    (metadata_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    declared = {Requirement(value).name.lower(): Requirement(value) for value in metadata.get_all("Requires-Dist", [])}
    for requirement in _runtime_requirements():
        assert requirement.name.lower() in declared, f"{requirement.name} missing from the wheel's Requires-Dist"
        assert str(declared[requirement.name.lower()].specifier) == str(requirement.specifier)
    assert metadata["Requires-Python"] == ">=3.11"


def test_readme_is_short_has_no_commit_hashes_and_ci_runs_its_test_command_verbatim():
    readme = (ROOT / "README.md").read_text()
    assert len(readme) <= 12_000
    assert not re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", readme), "a commit hash in the README"
    commands = re.findall(r"```bash\n(pip install torch.*)\n```", readme)
    assert len(commands) == 2, commands  # Quickstart: start the app, run the tests
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci
