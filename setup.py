"""Which files the wheel holds (the rest of the metadata is in pyproject.toml).

The matrices stay in the repository's top-level scenarios/ folder, their one copy; the wheel carries
them as the package data bench/scenarios/*.toml, where bench.planner.matrix.scenario_dir() finds them; the
claim files of `gpubench verify` (claims/) likewise as bench/claims/*.toml (bench.verify.claims.claims_dir()). A
folder mapped under another name cannot be expressed beside `packages.find` in pyproject.toml,
hence this file.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["bench", "bench.*"]), "bench.scenarios", "bench.claims"],
    package_dir={"bench.scenarios": "scenarios", "bench.claims": "claims"},
    package_data={"bench.scenarios": ["*.toml"], "bench.claims": ["*.toml"]},
)
