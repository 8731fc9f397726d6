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

from tests.test_import_graph import import_graph, imported_names, module_files

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
        "sweeps.laws.__main__": {"sweeps.study.tracking"},  # an entry point may reach down anywhere
        "pipeline.pretrain.driver": {"pipeline.defaults"},
        "models.layers.masking": {"models.registry"},  # same floor
    }
    assert upward_arrows(graph) == [
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
