"""The config loader (rayrm.rm.core.config.yamlload) against PyYAML's safe loader: the same
documents, value for value and type for type, and the same errors."""

from __future__ import annotations

import datetime

import pytest
import yaml

from rayrm.rm.core.config.yamlload import YamlLoader

SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(loader, text: str):
    try:
        return repr(yaml.load(text, Loader=loader))
    except Exception as e:  # noqa: BLE001 -- the error itself is compared
        return (type(e).__name__, str(e))


def test_a_cluster_listing_loads_as_the_safe_loader_loads_it():
    # three node groups sharing attribute texts; numbers in each YAML spelling: 8 (int),
    # 0x10 = 16, 1_000 = 1000, 1:20 = 80 (base 60), .5, 1.0e+3 = 1000.0 (YAML 1.1: 1e3 is text),
    # .nan, ~ and yes/no
    text = ("cluster:\n  nodes:\n"
            + "".join(f"  - {{name: m{i}, count: 2, capacity: {{cpu: 8, memory_mb: 0x10}}, "
                      f"attributes: {{a01: 1, a02: v0, a03: '1', a04: yes, a05: ~, a06: 1_000, a07: 1:20}}}}\n"
                      for i in range(3))
            + "run: {seed: .5, scale: 1.0e+3, text: 1e3, off: no, what: .nan}\n")
    doc = yaml.load(text, Loader=YamlLoader)
    assert repr(doc) == load(SAFE, text)
    node = doc["cluster"]["nodes"][2]
    assert node["capacity"] == {"cpu": 8, "memory_mb": 16}
    assert node["attributes"] == {"a01": 1, "a02": "v0", "a03": "1", "a04": True, "a05": None,
                                  "a06": 1000, "a07": 80}
    assert doc["run"]["scale"] == 1000.0 and doc["run"]["text"] == "1e3"
    assert [type(v) for v in doc["run"].values()] == [float, float, str, bool, float]


@pytest.mark.parametrize("text", [
    "a: &x {b: 1}\nc: *x\n",                 # an alias
    "a: &x [1, *x]\n",                       # a list holding itself
    "<<: {a: 1}\nb: 2\n",                    # a merge key
    "= : 1\n",                               # the value key
    "a: 1\na: 2\n",                          # a repeated key: the last
    "a: 2001-02-03\nb: !!binary aGk=\nc: !!set {x}\n",
    "- !!str 12\n- !!int '12'\n- !!float 1\n",
    "", "x\n",
    "? [1]\n: 2\n",                          # errors: an unhashable key,
    "a: !!bool maybe\n",                     # a bad bool, a bad date,
    "a: 2001-02-30\n",
    "a: [1, {b: !!int x}]\n",                # a bad int, an unknown tag
    "a: !custom x\n",
    "[" * 3000 + "]" * 3000,                 # deeper than the recursion limit
])
def test_every_other_document_and_error_is_the_safe_loaders(text):
    assert load(YamlLoader, text) == load(SAFE, text)


def test_an_alias_is_the_same_object_and_a_date_stays_a_date():
    doc = yaml.load("a: &x [1]\nb: *x\nc: 2001-02-03\n", Loader=YamlLoader)
    assert doc["a"] is doc["b"] and doc["c"] == datetime.date(2001, 2, 3)
