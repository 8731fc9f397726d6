"""Imports only point down the floors of the house, checked on the source (lazy imports included).

Floors, bottom to top (docs/architecture.md):
- packages: `models` (pure PyTorch) < `pipeline` (the stages) < `sweeps` (studies of many runs);
- inside `sweeps`: `protocol` (the recipe and the early-stop rule) < `record` (the study's MLflow
  record) < `laws` (fitting) < `report` (tables, figures, markdown) < `study` (running a study);
- an entry point (a package's `__main__`, `sweeps.scaling`, `sweeps.external`, `sweeps.advise`) sits above every
  floor of its own package: it is where a user comes in, and its folder only names the command;
- `pipeline.defaults` builds the embedded defaults with corpus and prep, so only entry points and
  `sweeps` may call it: a stage that imported it would climb above its neighbours.
"""

from __future__ import annotations

from tests.test_import_graph import REPO_ROOT, import_graph, imported_names, module_files

PACKAGE_FLOORS = {"models": 0, "pipeline": 1, "sweeps": 2}
SWEEPS_FLOORS = {"protocol": 0, "record": 1, "laws": 2, "report": 3, "study": 4}
SWEEPS_ENTRY_POINTS = {"sweeps.scaling", "sweeps.external", "sweeps.advise"}
TOP = 99


def is_entry_point(module: str) -> bool:
    return module.endswith(".__main__") or module in SWEEPS_ENTRY_POINTS


def floor(module: str) -> tuple[int, int]:
    """(package floor, floor inside the package); entry points top their package."""
    package, _, rest = module.partition(".")
    if is_entry_point(module):
        return PACKAGE_FLOORS[package], TOP
    inner = SWEEPS_FLOORS.get(rest.partition(".")[0], -1) if package == "sweeps" else 0
    return PACKAGE_FLOORS[package], inner


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    arrows = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            if floor(target) > floor(source):
                arrows.append(f"{source} -> {target}")
            elif target == "pipeline.defaults" and source.startswith("pipeline.") and not is_entry_point(source):
                arrows.append(f"{source} -> {target} (only entry points and sweeps build the defaults)")
    return arrows


def test_every_sweeps_module_sits_on_a_named_floor():
    unplaced = [m for m in module_files() if m.startswith("sweeps.") and m.count(".") >= 2
                and m.split(".")[1] not in SWEEPS_FLOORS and not is_entry_point(m)]  # fmt: skip
    top_level = [m for m in module_files() if m.count(".") == 1 and m.startswith("sweeps.")
                 and m not in SWEEPS_ENTRY_POINTS and m.split(".")[1] not in SWEEPS_FLOORS]  # fmt: skip
    assert unplaced == [] and top_level == []


def test_no_import_points_up_a_floor():
    assert upward_arrows(import_graph(module_files())) == []


def test_the_check_sees_an_upward_arrow_lazy_or_not():
    graph = {
        "pipeline.evaluate.cli": {"sweeps.study.log"},  # up a package
        "sweeps.report.markdown": {"sweeps.study.rule"},  # up inside sweeps
        "sweeps.laws.__main__": {"sweeps.study.law_analysis"},  # an entry point may reach down anywhere
        "pipeline.pretrain.driver": {"pipeline.defaults"},
        "models.layers.masking": {"models.registry"},  # same floor
        "models.__main__": {"pipeline.cli.command"},  # an entry point tops its own package only
    }
    assert upward_arrows(graph) == [
        "models.__main__ -> pipeline.cli.command",
        "pipeline.evaluate.cli -> sweeps.study.log",
        "pipeline.pretrain.driver -> pipeline.defaults (only entry points and sweeps build the defaults)",
        "sweeps.report.markdown -> sweeps.study.rule",
    ]


def test_the_product_never_imports_the_cluster_rehearsal():
    # cluster/rehearsal holds test doubles of a cloud's services (an S3 store, a tracking server).
    offenders = [
        f"{module} -> {name}"
        for module, path in module_files().items()
        for name in imported_names(module, path)
        if name == "cluster" or name.startswith("cluster.")
    ]
    assert offenders == []


def _top_level_imports(folder: str) -> set[str]:
    """`file -> package` for every import of a project folder outside the product (tests, benchmarks)."""
    root = REPO_ROOT / folder
    found = set()
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        found.update(f"{path.relative_to(REPO_ROOT)} -> {name}" for name in imported_names(module, path))
    return found


# The tests whose subject is a benchmark script: they may import it (and only they).
BENCHMARK_TESTS = {
    "tests/test_gpu_acceptance.py": "benchmarks.gpu_acceptance and its benchmarks.acceptance parts",
    "tests/sweeps/study/test_study_driver_scale.py": "benchmarks.bench_study_driver_scale",
    "tests/test_precision_drift.py": "benchmarks.precision_drift",
}


def crossing_arrows(arrows: list[tuple[str, str]]) -> list[str]:
    """The (file, imported name) pairs where tests import a benchmark they do not test, or a
    benchmark imports tests."""
    return sorted(
        f"{source} -> {target}"
        for source, target in arrows
        if (source.startswith("tests/") and source not in BENCHMARK_TESTS and target.split(".")[0] == "benchmarks")
        or (source.startswith("benchmarks/") and target.split(".")[0] == "tests")
    )


def test_tests_and_benchmarks_never_import_each_other():
    # Both stand on the product: what they share (the training core, a study with a known law) lives
    # in it, so a benchmark never runs test scaffolding and a product test never rests on a benchmark.
    arrows = [tuple(arrow.split(" -> ")) for arrow in _top_level_imports("tests") | _top_level_imports("benchmarks")]
    assert crossing_arrows(arrows) == []
    # The check sees both directions (the two arrows the training core and known_law_study replaced)
    # and lets a benchmark's own test import it.
    planted = [
        ("tests/support/pretrain_steps.py", "benchmarks.acceptance.training"),
        ("benchmarks/advise_coverage.py", "tests.support.synthetic_allocation"),
        ("tests/test_gpu_acceptance.py", "benchmarks.gpu_acceptance"),
    ]
    assert crossing_arrows(planted) == [
        "benchmarks/advise_coverage.py -> tests.support.synthetic_allocation",
        "tests/support/pretrain_steps.py -> benchmarks.acceptance.training",
    ]


def test_the_training_core_runs_without_ray():
    # The acceptance script runs it on a GPU machine without Ray; the Ray Train worker wraps it.
    graph = import_graph(module_files())
    seen, stack = set(), ["pipeline.pretrain.training_core"]
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(graph.get(module, ()))
    ray_users = sorted(
        module
        for module in seen
        for name in imported_names(module, module_files()[module])
        if name.split(".")[0] == "ray"
    )
    assert ray_users == []


def room(module: str, modules: dict) -> str:
    """A module's room: its folder one level inside its package (`pipeline.evaluate`), or the package
    itself for the package's own top-level files (`pipeline.checkpoint` is in `pipeline`)."""
    parts = module.split(".")
    folder = ".".join(parts[:2])
    return folder if len(parts) > 2 or (folder in modules and modules[folder].name == "__init__.py") else parts[0]


def two_way_ties(graph: dict[str, set[str]], modules: dict) -> list[str]:
    """Pairs of rooms that import each other. An entry point is where a user comes in, above every
    room (it may reach any), and a package's own `__init__` runs for every import of it: neither ties."""
    arrows = {
        (room(source, modules), room(target, modules))
        for source, targets in graph.items()
        if not is_entry_point(source)
        for target in targets
        if target not in PACKAGE_FLOORS
    }
    return sorted(f"{a} <-> {b}" for a, b in arrows if a < b and (b, a) in arrows)


def test_no_two_way_ties_between_rooms():
    modules = module_files()
    assert two_way_ties(import_graph(modules), modules) == []


def test_the_tie_check_sees_a_tie_and_lets_an_entry_point_reach_down():
    modules = {name: REPO_ROOT / "x.py" for name in ("pipeline.corpus", "pipeline.evaluate", "pipeline.checkpoint")}
    modules["pipeline.corpus"] = modules["pipeline.evaluate"] = REPO_ROOT / "pkg" / "__init__.py"
    graph = {
        "pipeline.corpus.tasks.language": {"pipeline.evaluate.task_data"},
        "pipeline.evaluate.baselines": {"pipeline.corpus.sources.parallel", "pipeline"},
        "pipeline.evaluate.__main__": {"pipeline.checkpoint"},
        "pipeline.checkpoint": {"pipeline.evaluate.run"},
    }
    assert two_way_ties(graph, modules) == ["pipeline.corpus <-> pipeline.evaluate"]
    assert room("pipeline.checkpoint", modules) == "pipeline" and room("pipeline.evaluate.run", modules) == (
        "pipeline.evaluate"
    )
