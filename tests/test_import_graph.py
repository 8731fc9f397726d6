"""The layout's rules, checked on the source (ast), so a lazy import inside a function counts too.

- No import cycles among the modules of `pipeline`, `models` and `sweeps`.
- Ray and MLflow appear only at the edges named below.
- No module over 400 lines (one concept per file), no function over 60 lines (docs/architecture.md).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "models", "sweeps")

# The edges: the Ray session, the Ray Data stage and reader, the Ray Train driver and worker
# loop, the Ray Tune driver, trial and scheduler. MLflow has one owner.
RAY_MODULES = {
    "pipeline.session.ray_session",
    "pipeline.prep.run",
    "pipeline.prep.featurize",
    "pipeline.prep.placement",  # which nodes see a local folder: tasks pinned to each
    "pipeline.pretrain.driver",
    "pipeline.pretrain.loop",
    "pipeline.pretrain.worker_setup",
    "pipeline.pretrain.checkpoint_report",  # ray.train.report with a checkpoint
    "pipeline.pretrain.preemption",  # ray.train.get_preemption_info
    "pipeline.pretrain.loopback_backend",  # Ray Train's torch backend for local runs
    "sweeps.study.driver",
    "sweeps.study.trainable",
    "sweeps.study.early_stop",
    "sweeps.study.progress",  # a Ray Tune callback
    "sweeps.study.beside_trials",  # a Ray Tune callback
    "sweeps.study.fits_beside",  # the laws in a Ray task while the baselines end
}
# tracking.py owns runs; its two neighbours add system metrics and the dataset input to them.
MLFLOW_MODULES = {"pipeline.tracking.runs", "pipeline.tracking.system_metrics", "pipeline.tracking.dataset"}
MAX_MODULE_LINES = 400  # one concept per file; ~300 is the usual size
MAX_FUNCTION_LINES = 60


def module_files(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the three packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name an import statement anywhere in the file refers to (relative ones resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            # `from pipeline.tracking import runs as tracking` imports the module pipeline.tracking.runs.
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (a name resolves to its longest module prefix)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = defaultdict(set)
    for module, path in modules.items():
        for name in imported_names(module, path):
            target = resolve(name) if name.split(".")[0] in PACKAGES else None
            if not target or target == module:
                continue
            graph[module].add(target)
            # Importing a.b.c runs a/__init__ and a/b/__init__ first; the importer's own ancestors
            # are already initialised by then, so only the others are edges.
            parts = target.split(".")
            for depth in range(1, len(parts)):
                package = ".".join(parts[:depth])
                if package in modules and not module.startswith(package + "."):
                    graph[module].add(package)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_checker_finds_a_lazy_cycle_and_a_relative_import(tmp_path):
    (tmp_path / "pipeline" / "stage").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "pipeline" / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "stage" / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "stage" / "a.py").write_text("from . import b\n")
    (tmp_path / "pipeline" / "stage" / "b.py").write_text("def f():\n    from pipeline.stage.a import x\n")
    (tmp_path / "pipeline" / "c.py").write_text("import ray\nfrom pipeline.stage import a\n")
    modules = module_files(tmp_path)
    graph = import_graph(modules)
    # Importing pipeline.stage.a runs the package's __init__ too: both are edges.
    assert graph["pipeline.c"] == {"pipeline.stage", "pipeline.stage.a"}
    assert find_cycles(graph) == [["pipeline.stage.a", "pipeline.stage.b"]]
    assert "ray" in imported_names("pipeline.c", modules["pipeline.c"])


def test_no_import_cycles_lazy_ones_included():
    cycles = find_cycles(import_graph(module_files()))
    assert cycles == [], "import cycles (a module that needs its caller is one concept split wrongly): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize("library, allowed", [("ray", RAY_MODULES), ("mlflow", MLFLOW_MODULES)])
def test_ray_and_mlflow_only_at_the_edges(library, allowed):
    importers = {
        module
        for module, path in module_files().items()
        if any(name.split(".")[0] == library for name in imported_names(module, path))
    }
    assert importers - allowed == set(), f"{library} imported outside its edge modules"
    assert importers, f"no module imports {library}: the allowed list is stale"


def test_modules_and_functions_stay_small():
    too_long = []
    for _module, path in module_files().items():
        source = path.read_text()
        if source.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(REPO_ROOT)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []
