"""Dependency bounds exclude major versions nobody has tested.

Every requirement of the installed distribution has an upper bound ``<N`` that
admits only releases below the next major version, and the environment running
the tests (CI builds a fresh one, so the newest release in range) satisfies it.
"""

from __future__ import annotations

from importlib.metadata import requires, version

from packaging.requirements import Requirement


def _requirements():
    return [Requirement(r) for r in requires("rayrm")]


def test_every_dependency_has_an_upper_bound_below_a_major():
    reqs = _requirements()
    assert {r.name.lower() for r in reqs} >= {"ray", "numpy", "pandas", "scipy", "highspy", "pyyaml",
                                                "matplotlib", "pytest", "hypothesis"}
    for r in reqs:
        uppers = [s for s in r.specifier if s.operator == "<"]
        assert len(uppers) == 1, f"{r}: needs one '<' bound"
        bound = uppers[0].version
        assert bound.isdigit(), f"{r}: the bound is a major version, e.g. <3, not {bound}"


def test_the_installed_versions_are_in_range():
    for r in _requirements():
        if r.marker is None or r.marker.evaluate({"extra": "test"}):
            assert r.specifier.contains(version(r.name), prereleases=True), f"{r.name} {version(r.name)} vs {r}"
