"""env.json's package versions: a package whose module another distribution ships is not null."""

from __future__ import annotations

from importlib import metadata

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


def test_this_machines_fabric_module_has_a_version() -> None:
    pytest.importorskip("lightning_fabric")
    assert envinfo.package_versions()["lightning-fabric"] is not None
