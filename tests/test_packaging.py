"""The package as an index would get it: ``python -m build`` then ``twine check``.

One sdist and one wheel from the working tree (built once per session, in an isolated build
environment); their metadata passes ``twine check --strict``; the wheel's version is the one
the provider info reports; the classifiers and project URLs are there; each extra adds a
requirement the core does not already have; the wheel holds the entry points Airflow reads and
the package data the operators load.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from airflow_provider_acid import __version__, get_provider_info

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def wheel_of(dist: Path) -> Path:
    (wheel,) = dist.glob("airflow_provider_acid-*.whl")
    return wheel


def metadata_of(dist: Path):
    with zipfile.ZipFile(wheel_of(dist)) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(name).decode())


def test_sdist_and_wheel_pass_twine_check(dist):
    built = sorted(p.name for p in dist.iterdir())
    assert len(built) == 2 and built[0].endswith(".whl") and built[1].endswith(".tar.gz")
    done = subprocess.run(
        [str(BIN / "twine"), "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_one_version_for_the_wheel_and_the_provider_info(dist):
    metadata = metadata_of(dist)
    assert metadata["Version"] == __version__
    assert get_provider_info()["versions"][0] == __version__
    assert wheel_of(dist).name.startswith(f"airflow_provider_acid-{__version__}-")
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name == f"airflow_provider_acid-{__version__}.tar.gz"


def test_classifiers_and_project_urls(dist):
    metadata = metadata_of(dist)
    classifiers = metadata.get_all("Classifier")
    assert "Framework :: Apache Airflow" in classifiers
    assert "Framework :: Apache Airflow :: Provider" in classifiers
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_each_extra_adds_a_requirement_the_core_lacks(dist):
    metadata = metadata_of(dist)
    requires = metadata.get_all("Requires-Dist")
    core = {requirement_name(r) for r in requires if "extra ==" not in r}
    extras = metadata.get_all("Provides-Extra")
    assert {"s3", "delta", "openlineage", "demo", "docs", "test"} <= set(extras)
    assert "iceberg" not in extras  # pyiceberg is a core dependency: an empty promise
    for extra in extras:
        added = {
            requirement_name(r) for r in requires if re.search(rf"extra == ['\"]{extra}['\"]", r)
        }
        assert added - core, f"the {extra!r} extra adds nothing the core does not have"


def test_the_wheel_holds_the_entry_points_and_package_data(dist):
    with zipfile.ZipFile(wheel_of(dist)) as archive:
        names = archive.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(entry_points).decode()
    assert "provider_info = airflow_provider_acid:get_provider_info" in text
    assert "acid_reports = airflow_provider_acid.plugins.reports:AcidReportsPlugin" in text
    assert "airflow-acid = airflow_provider_acid.cli:console_main" in text
    assert "airflow_provider_acid/operators/lineage_facets.schema.json" in names
    assert not [n for n in names if n.startswith(("tests/", "dags/", "scripts/"))]
