"""env.json's package versions: a package whose module another distribution ships is not null."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from bench.run import envinfo


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    dists = {"torch": "2.11.0", "lightning": "2.6.0"}

    def version(name: str) -> str:
        if name not in dists:
            raise metadata.PackageNotFoundError(name)
        return dists[name]

    monkeypatch.setattr(envinfo.metadata, "version", version)
    monkeypatch.setattr(
        envinfo.metadata,
        "packages_distributions",
        lambda: {"torch": ["torch"], "lightning_fabric": ["lightning"], "lightning": ["lightning"]},
    )
    return dists


def test_a_module_shipped_by_another_distribution_names_it(installed: dict[str, str]) -> None:
    got = envinfo.package_versions()
    assert got["torch"] == "2.11.0"
    assert got["lightning-fabric"] == "2.6.0 (lightning)"
    assert got["deepspeed"] is None  # nothing provides it
    assert set(got) == set(envinfo.PACKAGES)


def test_a_module_no_distribution_names_reads_its_version_file(
    installed: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on the GPU image: `lightning_fabric` imports, no distribution's metadata names it."""
    monkeypatch.setattr(envinfo.metadata, "packages_distributions", lambda: {})
    package = tmp_path / "lightning_fabric"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lightning_fabric", raising=False)  # find_spec would return its spec
    (package / "version.info").write_text("2.6.1\n")
    assert envinfo.package_versions()["lightning-fabric"] == "2.6.1 (version.info)"
    (package / "version.info").unlink()
    assert envinfo.package_versions()["lightning-fabric"] == "installed, version unknown"
    assert envinfo.package_versions()["deepspeed"] is None


def test_this_machines_fabric_module_has_a_version() -> None:
    pytest.importorskip("lightning_fabric")
    assert envinfo.package_versions()["lightning-fabric"] is not None
