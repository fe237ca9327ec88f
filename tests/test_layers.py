"""The package's shape, held against the code: every module sits in one layer, imports only from
its own layer or below, no import cycle runs through the package, no module passes 400 lines and
no function 60.  docs/architecture.md draws the same layers."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "audit"

# Lowest first; a module belongs to the first layer with a prefix of its dotted name.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("audit.errors", "audit.text", "audit.langcodes", "audit.items", "audit.ranges", "audit.timestamps",
                    "audit.outputs", "audit.paths", "audit.quotes", "audit.store", "audit.responses", "audit.forms",
                    "audit.nospace", "audit.langid", "audit.children", "audit.packed", "audit.evidence", "audit.executors", "audit.entries",
                    "audit.bars", "audit.memberscore", "audit.labels")),
    ("read", ("audit.readers",)),
    ("index", ("audit.index", "audit.neardup")),
    ("sources", ("audit.corpora", "audit.links", "audit.probes")),
    ("signals and policy", ("audit.signals", "audit.policy", "audit.policyfile", "audit.rules", "audit.exposure", "audit.langupgrade")),
    ("audit file", ("audit.records", "audit.recordview", "audit.auditschema", "audit.auditacross", "audit.auditlines", "audit.auditfile", "audit.auditscan", "audit.result")),
    ("run", ("audit.run", "audit.check")),
    ("consumers", ("audit.filter", "audit.report", "audit.evaluate")),
    ("shells", ("audit.cli", "audit.server", "audit.__main__", "audit")),
]


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} belongs to no layer; add it to LAYERS and docs/architecture.md")


def _imports(path: Path) -> set[str]:
    """The package modules `path` imports at run time, at any depth (lazy imports count; those
    under `if TYPE_CHECKING:` do not, as they never run)."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("audit"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("audit"))
        pending.extend(ast.iter_child_nodes(node))
    return found


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _edges() -> dict[str, set[str]]:
    """Who imports whom.  The package's face `audit` is left out as a target: it holds only the
    version eagerly, and the Python API it offers is imported lazily from the layers below."""
    return {name: {m for m in _imports(path) if m in MODULES and m not in (name, "audit")} for name, path in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        _layer(name)


def test_no_import_runs_up_a_layer() -> None:
    upward = [f"{name} ({LAYERS[_layer(name)][0]}) imports {other} ({LAYERS[_layer(other)][0]})"
              for name, targets in _edges().items() for other in sorted(targets) if _layer(other) > _layer(name)]
    assert upward == [], upward


def test_no_import_cycle() -> None:
    edges = {name: {t for t in targets if not name.startswith(t + ".") and t != "audit"} for name, targets in _edges().items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert cycles == [], cycles


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_and_functions_are_small(name: str) -> None:
    source = MODULES[name].read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 400, f"{name}: {len(source.splitlines())} lines"
    long = [f"{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 60]
    assert long == []


def _c_functions(source: str) -> list[tuple[int, int]]:
    """(first line, line count) of each function defined in a C source: its braces stand alone
    at the start of a line, after a signature ending in `)`."""
    lines = source.splitlines()
    found, start = [], None
    for number, line in enumerate(lines):
        if line == "{" and number and lines[number - 1].rstrip().endswith(")"):
            start = number - 1
        elif line == "}" and start is not None:
            found.append((start + 1, number - start + 1))
            start = None
    return found


C_SOURCES = sorted([*PACKAGE.glob("*.c"), *PACKAGE.glob("*.h")])


def test_c_sources_and_their_functions_are_small() -> None:
    """The extension's files keep the modules' sizes: 400 lines a file, 60 a function."""
    functions = {path.name: _c_functions(path.read_text(encoding="utf-8")) for path in C_SOURCES if path.suffix == ".c"}
    assert sum(map(len, functions.values())) > 50, "the C function finder finds too few functions to mean anything"
    big = [f"{path.name}: {n} lines" for path in C_SOURCES if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400]
    long = [f"{name}:{first}: {count} lines" for name, found in functions.items() for first, count in found if count > 60]
    assert big == [] and long == [], big + long


def _any_in_signatures(source: str) -> int:
    """How often `Any` appears in the annotations of a module's function signatures."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            annotated = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *filter(None, (arguments.vararg, arguments.kwarg))]
            annotations = [a.annotation for a in annotated if a.annotation is not None]
            count += sum(ast.unparse(annotation).count("Any") for annotation in [*annotations, *filter(None, [node.returns])])
    return count


def test_signatures_stay_typed() -> None:
    """Records are typed, not `dict[str, Any]`: the package's signatures held 403 `Any` before
    its records were typed and hold a handful now (interfaces over third-party objects).  The
    ceiling keeps new code from sliding back."""
    total = sum(_any_in_signatures(path.read_text(encoding="utf-8")) for path in MODULES.values())
    assert total <= 20, f"{total} `Any` in function signatures"
