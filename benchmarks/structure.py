#!/usr/bin/env python3
"""The package's shape, measured from its source (static analysis, nothing imported): how deep the imports from the
entry point go, how far the config travels from the run's entry, and how large src is.

    .venv/bin/python benchmarks/structure.py [TREE ...]      # default: this checkout; several trees side by side

Figures, per tree:
- `lines`, `files`, `top`: lines of Python under src/, its .py files, and the modules at the package's top level.
  `counted` and `features`: the lines issue 29 counts (src/ without the feature modules of the round that added the
  viewer, the Dask engine and the anchored scores, FEATURES) and the lines of those feature modules, apart.
- `chain`: the longest chain of imports from `rubricrun.cli`, counted in modules (cli itself is 1), over every
  import of the package's own modules, at module level or inside a function (a lazy import is still a step a run
  takes); imports under `if TYPE_CHECKING:` are left out (they never run). `chain (eager)`: the same over module-level imports only
  (what `import rubricrun.cli` itself loads). The chain itself is printed.
- `config reach`: the files a run's config can reach from `rubricrun.engine.runner` (where `execute` is): the
  modules runner imports, directly or through others (the same imports as `chain`), that import a name from
  `rubricrun.config` (Config or one of its sections, at run time or for type checking: a function there receives
  the config or a part of it).
  `Config reach` counts those importing `Config` itself. An approximation of the call tree: a module imported but
  not called with the config would count too, and a callee handed the config without importing its type would not.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = "rubricrun"
# Issue 29's feature modules, counted apart (paths under src/rubricrun; a folder ends with /).
FEATURES = (
    "viewer/",
    "providers/executor.py",
    "providers/dask_executor.py",
    "results/ppi.py",
    "results/anchor.py",
    "data/labels.py",
    "results/label_sheet.py",
)


def modules(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under `src`."""
    out = {}
    for path in sorted((src / PKG).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _walk(node: ast.AST, eager: bool, typing: bool = False):
    """(import statement, whether it is for type checking only) under `node`; with `eager`, not inside a function."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, typing
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not eager:
                yield from _walk(child, eager, typing)
        else:
            yield from _walk(child, eager, typing or _type_checking(child))


def imports(name: str, path: Path, known: dict[str, Path], *, eager: bool) -> tuple[set[str], set[str]]:
    """(the package's modules `name` imports at run time, the names it imports from rubricrun.config, also for type
    checking only: a function annotated with the config's type still receives it)."""
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()
    from_config: set[str] = set()
    for node, typing in _walk(ast.parse(path.read_text(encoding="utf-8")), eager):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = here[: len(here) - (node.level - 1)] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            if mod == f"{PKG}.config":
                from_config |= {a.name for a in node.names}
        if typing:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith(PKG):
                out.add(t)
    return out, from_config


def longest_chain(start: str, graph: dict[str, set[str]]) -> list[str]:
    """The longest path of modules from `start` that visits no module twice (cycles through lazy imports are cut)."""

    @cache
    def best(node: str, path: frozenset[str]) -> tuple[str, ...]:
        longest: tuple[str, ...] = ()
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                continue
            tail = best(nxt, path | {nxt})
            if len(tail) > len(longest):
                longest = tail
        return (node, *longest)

    return list(best(start, frozenset({start})))


def closure(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def measure(tree: Path) -> dict[str, object]:
    src = tree / "src"
    known = modules(src)
    lazy, eager, config_names = {}, {}, {}
    for name, path in known.items():
        lazy[name], config_names[name] = imports(name, path, known, eager=False)
        eager[name], _ = imports(name, path, known, eager=True)
    files = list((src / PKG).rglob("*.py"))
    size = {p.relative_to(src / PKG).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    lines, features = sum(size.values()), sum(n for rel, n in size.items() if rel.startswith(FEATURES))
    top = sorted(p.stem for p in (src / PKG).glob("*.py"))
    chain = longest_chain(f"{PKG}.cli", lazy)
    reach = closure(f"{PKG}.engine.runner", lazy)
    cfg_files = sorted(m for m in reach if config_names[m])
    Cfg_files = sorted(m for m in reach if "Config" in config_names[m])
    return {
        "lines": lines,
        "counted": lines - features,
        "features": features,
        "files": len(files),
        "top": len(top),
        "top modules": " ".join(top),
        "chain": len(chain),
        "chain (eager)": len(longest_chain(f"{PKG}.cli", eager)),
        "the chain": " > ".join(m.removeprefix(f"{PKG}.") for m in chain),
        "runner's import closure": len(reach),
        "config reach": len(cfg_files),
        "Config reach": len(Cfg_files),
        "config files": " ".join(m.removeprefix(f"{PKG}.") for m in cfg_files),
    }


def main(argv: list[str]) -> int:
    trees = [Path(a).resolve() for a in argv] or [REPO]
    results = [measure(t) for t in trees]
    for t in trees:
        commit = subprocess.run(["git", "-C", str(t), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        print(f"# {t} ({commit.stdout.strip() or 'no git'})")
    for key in results[0]:
        values = [str(r[key]) for r in results]
        if all(len(v) < 16 for v in values):
            print(f"{key:26} " + "  ".join(f"{v:>10}" for v in values))
        else:
            for t, v in zip(trees, values, strict=True):
                print(f"{key} [{t.name}]: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
