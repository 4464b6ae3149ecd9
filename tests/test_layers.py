"""The package's layering, read from the source with ``ast`` (docs/design.md, "Layout").

Layers import only downwards::

    core -> runs -> {sim, service, traces} -> offline -> {nodes, apps, ui} -> runtime -> cli

Every import of a rayrm module counts, function-level ones included: a function-level
import is allowed only to keep a heavy library (ray, matplotlib, scipy, pandas, pyarrow)
out of a light caller's start-up, and it must still point down the layers.  The command
line (``rayrm.rm.cli``) may defer any import, so that ``rayrm --help`` loads neither Ray,
pandas, scipy nor matplotlib.

Size, read the same way: no function or method outside ``tests/`` is longer than
``MAX_FUNCTION_LINES`` and no module than ``MAX_MODULE_LINES`` (docs/design.md, "Layout").
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("rm", "nodes", "apps", "traces", "configs")
HEAVY = {"ray", "matplotlib", "scipy", "pandas", "pyarrow", "highspy"}

# unit -> rank; an import must go to a strictly lower rank, or stay inside its unit
LAYERS = {
    "rayrm.rm.core": 0,
    "rayrm.rm.runs": 1,
    "rayrm.rm.sim": 2, "rayrm.rm.service": 2, "rayrm.traces": 2, "rayrm.configs": 2,
    "rayrm.rm.offline": 3,
    "rayrm.nodes": 4, "rayrm.apps": 4, "rayrm.rm.ui": 4,
    "rayrm.rm.runtime": 5,
    "rayrm.rm.cli": 6,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("rayrm",) + parts)


def unit(module: str) -> str:
    for name in sorted(LAYERS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    if module in ("rayrm", "rayrm.rm"):
        return module
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def collect():
    """module -> list of (imported module, names, function-level?, line)."""
    sources = {module_name(p): p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py")}
    sources[module_name(ROOT / "__init__.py")] = ROOT / "__init__.py"
    imports = defaultdict(list)
    heavy_at_top = set()
    for mod, path in sources.items():
        tree = ast.parse(path.read_text(), str(path))
        in_functions = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                        for n in ast.walk(f)}
        for node in ast.walk(tree):
            nested = id(node) in in_functions
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    raise AssertionError(f"{path}:{node.lineno}: relative import; write rayrm.… in full")
                _record(imports, heavy_at_top, mod, node.module or "", [a.name for a in node.names],
                        nested, node.lineno, sources)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    _record(imports, heavy_at_top, mod, a.name, [], nested, node.lineno, sources)
    return sources, imports, heavy_at_top


def _record(imports, heavy_at_top, mod, target, names, nested, line, sources):
    root = target.split(".")[0]
    if root in ("rm", "nodes", "apps", "traces", "configs"):
        raise AssertionError(f"{mod}:{line}: imports {target}; rayrm's modules are imported as rayrm.{target}")
    if root == "rayrm":
        # ``from rayrm.x import y`` may name a submodule y
        resolved = [f"{target}.{n}" for n in names if f"{target}.{n}" in sources] or [target]
        for r in resolved:
            imports[mod].append((r, [n for n in names if f"{target}.{n}" not in sources], nested, line))
    elif root in HEAVY and not nested:
        heavy_at_top.add(mod)


SOURCES, IMPORTS, HEAVY_AT_TOP = collect()

def layer_violations() -> dict[str, str]:
    wrong = {}
    for mod, targets in IMPORTS.items():
        for target, _names, _nested, line in targets:
            a, b = unit(mod), unit(target)
            if a != b and b in LAYERS and LAYERS.get(a, 99) <= LAYERS[b]:
                wrong[f"{mod} -> {target}"] = f"{mod}:{line} -> {target} ({a} may not import {b})"
    return wrong


def test_every_import_points_down_the_layers():
    assert sorted_messages(layer_violations()) == []


def cycle_violations() -> dict[str, str]:
    graph = {m: {t for t, *_ in IMPORTS[m] if t in SOURCES and t != m} for m in SOURCES}
    # a package's __init__ importing its own submodules is no cycle
    for m in graph:
        graph[m] = {t for t in graph[m] if not t.startswith(m + ".")}
    cycles, state = [], {}

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return {c: c for c in cycles}


def test_no_import_cycles_between_modules():
    assert sorted_messages(cycle_violations()) == []


def private_violations() -> dict[str, str]:
    wrong = {f"{mod} -> {target}": f"{mod}:{line} imports {n} from {target}"
             for mod, targets in IMPORTS.items() for target, names, _, line in targets
             for n in names if n.startswith("_") and target != mod}
    return wrong


def test_no_module_imports_another_modules_private_name():
    assert sorted_messages(private_violations()) == []


def sorted_messages(found: dict[str, str]) -> list[str]:
    """The violations found ("importer -> imported": message), as sorted messages."""
    return sorted(found.values())


def heavy(module: str, seen=None) -> bool:
    """Does importing ``module`` load a heavy library (directly or through rayrm modules)?"""
    seen = seen if seen is not None else set()
    if module in seen or module not in SOURCES:
        return False
    seen.add(module)
    return module in HEAVY_AT_TOP or any(heavy(t, seen) for t, _, nested, _ in IMPORTS.get(module, ()) if not nested)


def deferral_violations() -> dict[str, str]:
    wrong = {f"{mod} -> {target}": f"{mod}:{line} imports {target} inside a function, but {target} "
             "loads no heavy library"
             for mod, targets in IMPORTS.items() for target, _, nested, line in targets
             if nested and not heavy(target) and unit(mod) != "rayrm.rm.cli"}
    return wrong


def test_function_level_imports_only_defer_heavy_libraries():
    assert sorted_messages(deferral_violations()) == []


@pytest.mark.parametrize("package", sorted({p.parent for d in SOURCE_DIRS for p in (ROOT / d).rglob("__init__.py")}))
def test_no_package_holds_more_than_15_modules(package):
    modules = [p for p in package.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= 15, f"{package.relative_to(ROOT)} holds {len(modules)} modules"


def test_every_package_says_what_it_is():
    missing = [str(p.relative_to(ROOT)) for d in SOURCE_DIRS for p in (ROOT / d).rglob("__init__.py")
               if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_every_document_the_code_cites_is_in_the_repository():
    cited = {(str(p.relative_to(ROOT)), doc)
             for d in SOURCE_DIRS + ("tests", "benchmarks", "docs") for p in (ROOT / d).rglob("*.py")
             for doc in re.findall(r"[\w./-]+\.md\b", p.read_text())}
    cited |= {("README.md", doc) for doc in re.findall(r"[\w./-]+\.md\b", (ROOT / "README.md").read_text())}
    missing = sorted(f"{where} cites {doc}" for where, doc in cited
                     if not (ROOT / doc).exists() and not (ROOT / "docs" / doc).exists())
    assert missing == []


def test_no_test_module_imports_another():
    tests = {p.stem for p in (ROOT / "tests").glob("test_*.py")}
    wrong = sorted(f"{p.name} imports {node.module or node.names[0].name}"
                   for p in (ROOT / "tests").glob("*.py")
                   for node in ast.walk(ast.parse(p.read_text()))
                   if isinstance(node, (ast.Import, ast.ImportFrom))
                   and ((node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or "") in tests)
    assert sorted_messages({w.split(" imports ")[0] + " -> " + w.split(" imports ")[1]: w for w in wrong}) == []


MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500


def package_sources() -> list[Path]:
    """Every .py file of the package (its subpackages and root ``__init__.py``) and of
    benchmarks/: all the code outside tests/ (not a virtual environment inside the checkout)."""
    found = [p for d in SOURCE_DIRS + ("benchmarks",) for p in (ROOT / d).rglob("*.py")]
    found += [p for p in ROOT.glob("*.py")]
    return sorted(found)


def size_violations() -> dict[str, str]:
    """Functions over MAX_FUNCTION_LINES (end_lineno − lineno + 1, decorators not counted)
    and modules over MAX_MODULE_LINES physical lines."""
    wrong = {}
    for path in package_sources():
        where = str(path.relative_to(ROOT))
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            wrong[where] = f"{where}: {lines} lines (at most {MAX_MODULE_LINES})"
        for node in ast.walk(ast.parse(text, where)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    wrong[f"{where}:{node.lineno}"] = (f"{where}:{node.lineno}: {node.name} is {length} lines "
                                                      f"(at most {MAX_FUNCTION_LINES})")
    return wrong


def test_no_function_over_80_lines_and_no_module_over_500():
    assert sorted_messages(size_violations()) == []


def test_the_size_check_counts_what_it_should(tmp_path, monkeypatch):
    # an 81-line function (def line + 80 body lines) and a 501-line module are reported;
    # an 80-line function and a 500-line module are not
    long_fn = "def f():\n" + "    x = 1\n" * 80
    ok_fn = "def g():\n" + "    x = 1\n" * 79
    (tmp_path / "rm").mkdir()
    (tmp_path / "rm" / "a.py").write_text(long_fn + ok_fn)               # 81 + 80 = 161 lines
    (tmp_path / "rm" / "b.py").write_text("x = 1\n" * 501)
    (tmp_path / "c.py").write_text("x = 1\n" * 500)
    for elsewhere in ("tests", ".ci-venv"):                              # neither is counted
        (tmp_path / elsewhere).mkdir()
        (tmp_path / elsewhere / "d.py").write_text("x = 1\n" * 600)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert sorted_messages(size_violations()) == [
        "rm/a.py:1: f is 81 lines (at most 80)", "rm/b.py: 501 lines (at most 500)"]


# ----- each formula once (docs/design.md, "Vocabulary and formulas") -------------------------

#: the one module of h_i, the resource roles and the share formulas
SHARES = "rayrm.rm.core.shares"
#: module-level functions that compute one of them: defined in SHARES alone
FORMULA_NAMES = {"tasks_per_machine", "h_tasks", "tasks_fit", "h_unconstrained", "h_constrained", "task_share",
                 "dominant_share", "dominant_share_per_task", "dominant_per_task", "share_per_task",
                 "resource_share", "resource_index", "resource_column", "app_shares", "share_units"}
#: names that stand for h_i or h_i^c
H_NAMES = {"h", "h_c", "h_unconstrained", "h_constrained", "h_tasks"}
#: prefixes of the dimension names of the roles CPU and memory (shares.ROLES)
ROLE_PREFIXES = ("cpu", "mem", "vcore")
#: the built-in policies' names and the offline aliases: no reader compares a policy with them
POLICY_NAMES = {"tsf", "drf", "cdrf", "cmmf", "cmmf-cpu", "cmmf-mem", "fifo", "drfh", "drfh-ff", "drfh-bf",
                "pm-drf", "slots"}
#: (module, function) -> why an expression there that looks like a formula is not one
NOT_A_FORMULA = {
    ("rayrm.rm.offline.lp", "Filling.__init__"): "divides task limits by h_i: the LP's variables are y = n / h",
    ("rayrm.rm.runs.report", "_compare"): "Fig. 10 and 11b set every run against the TSF run, the paper's baseline",
    ("rayrm.traces.google_workload", "generate_google"):
        "the generator's admission bound floors C / d without EPS; generated traces stay as they are",
}


def _names(node) -> set[str]:
    """Every name, attribute and called function inside an expression, but those only
    used as an index (``share[h]`` does not divide by h)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr} | _names(node.value)
    if isinstance(node, ast.Subscript):
        return _names(node.value)
    return set().union(*(_names(c) for c in ast.iter_child_nodes(node)))


def _formula_in(node) -> str | None:
    """What formula an expression re-derives, if it looks like one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        below = _names(node.right)
        if below & H_NAMES:
            return "divides by h_i (a task share n / (h w))"
        if "demand" in _names(node.left) and below & {"total", "divisor_total"}:
            return "divides a demand by the total (a dominant or resource share)"
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        sides += [e for side in sides if isinstance(side, (ast.Tuple, ast.List, ast.Set)) for e in side.elts]
        texts = {c.value for c in sides if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        if texts & POLICY_NAMES:
            return "compares a policy with a built-in's name (ask the policy: Policy.share_kind)"
    if isinstance(node, ast.Call):
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if func == "startswith":
            texts = [c.value for a in node.args for c in ast.walk(a) if isinstance(c, ast.Constant)
                     and isinstance(c.value, str)]
            if any(t.lower().startswith(ROLE_PREFIXES) for t in texts):
                return "names a resource role by prefix (shares.resource_index)"
            if any(t.startswith(tuple(POLICY_NAMES)) for t in texts):
                return "picks by a policy's name prefix (ask the policy: Policy.share_kind)"
        if func == "floor" and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
                                   for a in node.args for n in ast.walk(a)):
            return "floors a ratio C / d (tasks per machine, one term of h_i)"
    return None


def formula_violations(sources=None) -> dict[str, str]:
    """Formulas defined or re-derived outside ``SHARES`` (module -> source path)."""
    wrong = {}
    for mod, path in sorted((sources or SOURCES).items()):
        if mod == SHARES:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in FORMULA_NAMES:
                wrong[f"{mod}:{node.lineno}"] = f"{mod}:{node.lineno}: defines {node.name} (it lives in {SHARES})"

        def visit(node, where: str) -> None:
            for child in ast.iter_child_nodes(node):
                inner = where
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = f"{where}.{child.name}" if where else child.name
                what = _formula_in(child)
                if what and (mod, inner) not in NOT_A_FORMULA:
                    wrong[f"{mod}:{child.lineno}"] = f"{mod}:{child.lineno}: {inner or '<module>'} {what}"
                visit(child, inner)

        visit(tree, "")
    return wrong


def test_h_and_each_share_formula_are_defined_once():
    assert sorted_messages(formula_violations()) == []


def test_the_formula_check_finds_what_it_should(tmp_path):
    # the shapes the formulas had outside rm/core/shares.py before it held them all
    (tmp_path / "a.py").write_text(
        "import math\n"
        "def h_unconstrained(p):\n    return 0\n"                                    # 2: a formula's name
        "def unit(app, total, w):\n"
        "    return 1.0 / (app.h * w)\n"                                              # 5: n / (h w)
        "def cmmf(app, total, r):\n"
        "    return app.demand[r] / total[r]\n"                                       # 7: d / total
        "def roles(dims):\n"
        "    return [d for d in dims if d.lower().startswith(('cpu', 'vcore'))]\n"    # 9: role by prefix
        "def fit(c, d):\n"
        "    return math.floor(min(x / y for x, y in zip(c, d)))\n"                    # 11: floor(C / d)
        "def kind(policy):\n"
        "    if policy.startswith(('drf', 'pm-drf')):\n"                              # 13: name prefix
        "        return 'dominant'\n"
        "    return 'work' if policy == 'cdrf' else 'task'\n"                         # 15: a name
        "def fine(n, used, limit, h):\n"
        "    return n * h, used / limit, math.floor(n)\n")                           # none of them
    found = sorted_messages(formula_violations({"rayrm.rm.x": tmp_path / "a.py"}))
    assert [m.split(": ", 1)[0] for m in found] == [f"rayrm.rm.x:{k}" for k in (11, 13, 15, 2, 5, 7, 9)]


#: the queue tree's formulas -> the one module that defines them: a queue's fair share
#: (water-filling, steady share) and its bounds (capacities followed down the tree)
QUEUE_FORMULAS = {"fair_shares": "rayrm.rm.core.queues.fairshare",
                  "weight_to_share_ratio": "rayrm.rm.core.queues.fairshare",
                  "steady_shares": "rayrm.rm.core.queues.fairshare",
                  "water_fill": "rayrm.rm.core.queues.fairshare",
                  "resolve_bounds": "rayrm.rm.core.queues.tree", "tree_bounds": "rayrm.rm.core.queues.tree",
                  "child_shares": "rayrm.rm.core.queues.tree", "_bounds": "rayrm.rm.core.queues.tree"}


def _queue_formula_in(node) -> str | None:
    """What queue formula an expression re-derives, if it looks like one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        right = node.right
        if isinstance(right, ast.Constant) and right.value == 100 and _names(node.left) & {"capacity", "max_capacity"}:
            return "takes a capacity percentage of the parent's share (tree.child_shares)"
        if "weight" in _names(node.left) and (_names(right) & {"total", "sum"} or "weight" in _names(right)):
            return "divides a weight by the siblings' (a fair share: fairshare.steady_shares)"
    return None


def queue_formula_violations(sources=None) -> dict[str, str]:
    """Queue formulas defined (at module level) or re-derived outside their module."""
    wrong = {}
    for mod, path in sorted((sources or SOURCES).items()):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and QUEUE_FORMULAS.get(node.name, mod) != mod:
                wrong[f"{mod}:{node.lineno}"] = (f"{mod}:{node.lineno}: defines {node.name} "
                                                 f"(it lives in {QUEUE_FORMULAS[node.name]})")
        if mod in set(QUEUE_FORMULAS.values()):
            continue
        for node in ast.walk(tree):
            what = _queue_formula_in(node)
            if what:
                wrong[f"{mod}:{node.lineno}"] = f"{mod}:{node.lineno}: {what}"
    return wrong


def test_each_queue_formula_is_defined_once():
    assert sorted_messages(queue_formula_violations()) == []


def test_the_queue_formula_check_finds_what_it_should(tmp_path):
    # the shapes the queue formulas had in the UI's and the run's readers before they were one
    (tmp_path / "a.py").write_text(
        "def water_fill(amount, weights, lows, highs):\n    return []\n"             # 1: a second water-filling
        "def _bounds(tree, total):\n    return {}\n"                                 # 3: a second bounds walk
        "def walk(c, share):\n"
        "    return share * c.capacity / 100\n"                                      # 6: capacity of the parent's
        "def steady(fair, q, c, total):\n"
        "    return fair[q] * c.weight / total\n"                                    # 8: weights-only share
        "def fine(q, used, limit):\n"
        "    return used / limit, q.weight * 2\n")                                    # neither
    found = sorted_messages(queue_formula_violations({"rayrm.rm.x": tmp_path / "a.py"}))
    assert [m.split(": ", 1)[0] for m in found] == [f"rayrm.rm.x:{k}" for k in (1, 3, 6, 8)]


#: functions whose first argument names an RM call when it is one's name
NAMING = {"getattr", "hasattr", "setattr", "method", "call", "_call", "serve", "apply", "wire", "Call"}
CALL_TABLE = Path("rm") / "service" / "calls.py"


def call_name_violations(names: set[str]) -> dict[str, str]:
    """Places outside the table of RM calls (rm/service/calls.py) that name a call by a string:
    a call's name handed to a function that dispatches or sends by name (``NAMING``), or a
    collection literal (or dict's keys) of nothing but two or more calls' names — an allow-list."""
    def strings(nodes):
        return [n.value for n in nodes if isinstance(n, ast.Constant) and n.value in names]

    wrong = {}
    for path in package_sources():
        where = path.relative_to(ROOT)
        if where == CALL_TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(where))):
            found = []
            if isinstance(node, ast.Call) and node.args:
                f = node.func
                fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if fname in NAMING:
                    found = strings(node.args[:2])
            elif isinstance(node, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
                elts = node.keys if isinstance(node, ast.Dict) else node.elts
                held = strings(elts)
                found = held if len(held) >= 2 and len(held) == len(elts) else []
            if found:
                wrong[f"{where}:{node.lineno}"] = f"{where}:{node.lineno}: names RM calls by string: {found}"
    return wrong


def test_no_rm_call_is_named_by_a_string_outside_the_table():
    from rayrm.rm.service.calls import Call  # noqa: PLC0415 - the table itself is the reference
    assert sorted_messages(call_name_violations({c.value for c in Call})) == []


def test_the_call_name_check_finds_what_it_should(tmp_path, monkeypatch):
    # a client sending by name, a channel's allow-list and getattr dispatch are reported; an
    # event kind that shares a call's name ("fault"), a lone name in a literal and a table's
    # columns that include two ("fault", "allocate") are not
    (tmp_path / "rm" / "service").mkdir(parents=True)
    (tmp_path / "rm" / "client.py").write_text(
        'async def f(self, x):\n    return await self._call("allocate", x)\n')
    (tmp_path / "rm" / "channel.py").write_text(
        'CALLS = frozenset({"allocate", "poll"})\n'
        'def g(target, name):\n    return getattr(target, "allocate")\n')
    (tmp_path / "rm" / "log.py").write_text(
        'def h(log):\n    log.event(1.0, "fault")\n    return ("fault", 1), ["at", "fault", "allocate"]\n')
    (tmp_path / CALL_TABLE).write_text('NAMES = ("allocate", "poll")\n')        # the table may
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert sorted_messages(call_name_violations({"allocate", "poll", "fault"})) == [
        "rm/channel.py:1: names RM calls by string: ['allocate', 'poll']",
        "rm/channel.py:3: names RM calls by string: ['allocate']",
        "rm/client.py:2: names RM calls by string: ['allocate']"]


# ----- every README figure from its table (the rules: tests/test_docs.py) ----------------------

def test_every_readme_figure_links_to_the_results_section_that_holds_it():
    from docfigures import unsourced   # noqa: PLC0415 — the figure rules, tested in test_docs.py

    assert unsourced((ROOT / "README.md").read_text(), ROOT) == []
