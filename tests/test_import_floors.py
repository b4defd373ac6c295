"""The package is a house of floors: each module imports only modules on its
own floor or below, at module level and inside functions, and no imports
run in a circle. See docs/architecture.md for what each floor holds."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "kerasbert"

# The lowest floor a module may live on, by its dotted name's longest listed
# prefix; higher floors may import lower ones, never the other way round.
FLOORS = {
    "kerasbert.utils": 0,
    "kerasbert.layers": 0,
    "kerasbert.losses": 0,
    "kerasbert.metrics": 0,
    "kerasbert.optimizers": 0,
    "kerasbert.checkpointing": 0,
    "kerasbert.distribution": 0,
    "kerasbert.encoder": 1,
    "kerasbert.encoder_arguments": 1,
    "kerasbert.presets": 2,
    "kerasbert.convert": 2,
    "kerasbert.tokenizers": 3,
    "kerasbert.preprocessing": 3,
    "kerasbert.readers": 3,
    "kerasbert.export": 4,
    "kerasbert.tasks": 5,
    "kerasbert.runs": 6,
    "kerasbert.cli": 7,
    "kerasbert.__main__": 7,
    "kerasbert": 7,
}


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name, path, known):
    """The kerasbert modules one module imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names)
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        found.add(target)
    # A package's __init__ gathering its own modules imports no other floor.
    return {t for t in found if t and t != name and not (is_package and t.startswith(name + "."))}


def floor(name):
    prefix = name
    while prefix not in FLOORS:
        prefix = prefix.rpartition(".")[0]
    return FLOORS[prefix]


@pytest.fixture(scope="module")
def graph():
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_no_module_imports_from_a_higher_floor(graph):
    upward = sorted(f"{name} (floor {floor(name)}) -> {target} (floor {floor(target)})"
                    for name, targets in graph.items() for target in targets
                    if floor(target) > floor(name))
    assert not upward, "imports from a higher floor:\n" + "\n".join(upward)


def test_no_imports_run_in_a_circle(graph):
    # Tarjan's strongly connected components, iteratively.
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    assert not circles, "imports in a circle: " + "; ".join(", ".join(c) for c in circles)


def test_no_module_imports_tensorflow_at_its_top():
    """TensorFlow and TensorFlow Text are optional (docs/architecture.md):
    named through kerasbert.utils.optional, imported inside functions."""
    found = []
    for name, path in modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module-level statements only
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            found += [f"{name}:{node.lineno} imports {root}" for root in roots
                      if root in ("tensorflow", "tensorflow_text")]
    assert not found, "\n".join(found)
