"""The import layering of the package, pinned: plugins, text < config, storage, seeds, trial_status < tasks, sweep_dir < model <
training, evaluation, sweep < cluster, dashboards, plan, figures < api < cli, with no import going up or sideways between layers, no circle between
modules, and Ray imported only under `abacus_ray/cluster/` (docs: README "Layout")."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = {  # package -> floor; a module may import its own package or any lower floor
    "abacus_ray.plugins": -1, "abacus_ray.text": -1, "abacus_ray.config": 0, "abacus_ray.storage": 0, "abacus_ray.seeds": 0, "abacus_ray.trial_status": 0,
    "abacus_ray.tasks": 1, "abacus_ray.sweep_dir": 1, "abacus_ray.model": 2,
    "abacus_ray.training": 3, "abacus_ray.evaluation": 3, "abacus_ray.sweep": 3,
    "abacus_ray.cluster": 4, "dashboards": 4, "abacus_ray.plan": 4, "abacus_ray.figures": 4,
    "abacus_ray.api": 5, "abacus_ray.cli": 6,
}


def _package(module: str) -> str | None:
    return next((p for p in sorted(LAYERS, key=len, reverse=True) if module == p or module.startswith(p + ".")), None)


def _modules() -> dict[str, Path]:
    out = {}
    for root in ("abacus_ray", "dashboards"):
        for path in (REPO / root).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every module imported anywhere in the file (function-local imports too), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from pkg import sub` imports the submodule `pkg.sub`; `from pkg import name`, the module `pkg`
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            found += [(m, node.lineno) for m in subs or [node.module]]
    return found


MODULES = _modules()
GRAPH = {m: {i for i, _ in _imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}


def test_every_module_belongs_to_a_layer():
    assert [m for m in MODULES if m != "abacus_ray" and _package(m) is None] == []


def test_no_import_goes_up_or_sideways():
    bad = []
    for module, path in MODULES.items():
        own = _package(module)
        if own is None:
            continue
        for name, line in _imports(path):
            other = _package(name)
            if other is not None and other != own and LAYERS[other] >= LAYERS[own]:
                bad.append(f"{path.relative_to(REPO)}:{line}: {own} imports {name}")
    assert bad == []


def test_no_import_circles_between_modules():
    state: dict[str, int] = {}
    cycles = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for n in sorted(GRAPH[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n] if n in stack else [m, n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_ray_is_imported_only_by_the_cluster_layer():
    users = {m for m, p in MODULES.items() for name, _ in _imports(p) if name.split(".")[0] == "ray"}
    assert users and all(_package(m) == "abacus_ray.cluster" for m in users), sorted(users)
    cluster = {m for m in MODULES if _package(m) == "abacus_ray.cluster" and m != "abacus_ray.cluster"}
    assert cluster <= users, sorted(cluster - users)  # cluster/ holds only code that imports Ray


@pytest.mark.parametrize("name", ["_TorchBackend", "_set_torch_distributed_env_vars", "_setup_torch_process_group"])
def test_the_private_ray_names_the_rendezvous_relies_on_still_exist(name):
    """`cluster/rendezvous.py` subclasses Ray's private torch backend: a Ray upgrade that renames or
    reshapes these fails here, loudly, instead of inside a trial."""
    import inspect

    from ray.train.torch import config

    obj = getattr(config, name)
    if name == "_TorchBackend":
        assert inspect.signature(obj.on_start).parameters.keys() >= {"worker_group", "backend_config"}
    if name == "_setup_torch_process_group":
        assert inspect.signature(obj).parameters.keys() >= {"backend", "world_rank", "world_size", "init_method",
                                                            "timeout_s"}
