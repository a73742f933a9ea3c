"""numba's cache of the kernels, never stale: each kernel module's cached entries are stamped with
every source they are compiled from, and removed before loading when any of those changed.

numba keys a cached function on the one file that defines it (its content hash since numba 0.68,
its time and size before), yet the machine code it caches holds the helpers the function calls
from other modules, inlined or linked, and the constants it imports from them. After an upgrade
that changes only a helper (`kinematics.collision._primitive_kernels`, say), numba would serve
the entry kernels' old code. `drop_stale_entries` runs before the kernels load
(`kinematics.compiled.compile_entries`): per kernel module, a stamp file beside numba's entries in
its cache folder (``_kernels.py311.sources`` beside ``_kernels.<function>-<line>.py311.nbi`` and
``.nbc``) names the SHA-256 of each of its sources; a missing or different stamp means its
entries are removed, then numba compiles them again and caches them. Like numba's entries, the
stamps are per Python version, so that two interpreters sharing a folder keep theirs.

Where numba caches is numba's choice (`Dispatcher.stats.cache_path`): ``$NUMBA_CACHE_DIR`` when
set, else the ``__pycache__`` beside the module when numba can write there, else a per-user
folder. numba tries to write a file in a folder before it chooses it, so the folder a stamp goes
into is writable; should removing or stamping still fail, the module's functions compile without
the cache in that process (`drop_stale_entries`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["PYTHON_TAG", "drop_stale_entries", "kernel_sources", "stamp_name"]

_log = logging.getLogger(__name__)

PYTHON_TAG = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
"""How numba's entry files name this Python (``_kernels.all_finite-117.py311.nbi``)."""

# module name -> (source file, the file's SHA-256, the modules of the kernels' packages it imports)
_Graph = dict[str, tuple[str, str, frozenset[str]]]


def drop_stale_entries(kernels: Iterable[Any], report: Callable[[str], None]) -> int:
    """Remove from numba's cache the entries of each module the `kernels` (numba dispatchers) are
    compiled from whose sources changed since they were cached, and stamp each such module's
    cache folder with its sources; returns how many files were removed. `report` hears which
    modules' entries were removed. Call it before the kernels compile or load.

    A warm start only hashes the sources the stamps name (`_stamps_hold`); the sources are read
    for their imports only when a stamp is missing or differs. Only the files numba names after
    a module (``<module>.*.nbi``, ``.nbc``) are removed, never another program's in a shared
    ``$NUMBA_CACHE_DIR``. Where they cannot be removed or the stamp written (`OSError`), numba's
    cache is disabled for that module's functions in this process, with a warning: they compile
    in memory, correct but slow, at each start.
    """
    roots = {kernel.py_func.__module__ for kernel in kernels}
    if _stamps_hold(roots):
        return 0
    graph = _import_graph(roots)
    removed = 0
    for name in sorted(graph):
        dispatchers = _cached_dispatchers(name)
        hashes = {source: graph[source][1] for source in _closure(name, graph)}
        stamp = _stamp(name, hashes)
        for folder in sorted({Path(d.stats.cache_path) for d in dispatchers}):
            try:
                removed += _refresh(folder, _stem(name), stamp, name, report)
            except OSError as exc:
                _log.warning(
                    "numba's cache %s: cannot remove %s's stale kernels or stamp them (%s): "
                    "they compile without the cache in this process",
                    folder,
                    name,
                    exc,
                )
                for dispatcher in dispatchers:
                    dispatcher._cache.disable()
    return removed


def _stamps_hold(roots: set[str]) -> bool:
    """Whether the stamp of each of the `roots`, and of each module their stamps name that numba
    caches, is the stamp of its sources as they are now (files hashed, not parsed: sources whose
    bytes are those a stamp was written from import what they imported then)."""
    hashes: dict[str, str] = {}
    seen: set[str] = set()
    todo = sorted(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for folder in {Path(d.stats.cache_path) for d in _cached_dispatchers(name)}:
            try:
                found = (folder / stamp_name(_stem(name))).read_text(encoding="utf-8")
                sources = [line.split()[1] for line in found.splitlines() if _SOURCE.match(line)]
                for source in sources:
                    hashes.setdefault(source, _file_hash(source))
            except (OSError, UnicodeDecodeError, ImportError):
                return False
            if not sources or found != _stamp(name, {s: hashes[s] for s in sources}):
                return False
            todo.extend(sources)
    return True


_SOURCE = re.compile(r"^[0-9a-f]{64} \S+$")  # a stamp's line for one source: its SHA-256, its name


def _file_hash(name: str) -> str:
    """The SHA-256 of module `name`'s source file. Raises `ImportError`, `OSError`."""
    return hashlib.sha256(Path(_source_file(name)).read_bytes()).hexdigest()


def _source_file(name: str) -> str:
    """Module `name`'s source file (imports its parent package). Raises `ImportError`."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ImportError(f"kernel module {name!r}: no Python source file found")
    return spec.origin


def _stem(name: str) -> str:
    """The name numba gives module `name`'s entries: its file's, without ``.py``."""
    return Path(_source_file(name)).stem


def stamp_name(stem: str) -> str:
    """The stamp's file name, in its cache folder, of the entries of module file `stem` (its
    name without ``.py``) for this Python: ``_kernels.py311.sources``."""
    return f"{stem}.{PYTHON_TAG}.sources"


def kernel_sources(module: str) -> dict[str, str]:
    """The sources the kernels of `module` are compiled from, by module name: its own file and
    every module of its package it imports, directly or through another; values are the files'
    paths. Reads (and parses) those files; imports nothing new."""
    graph = _import_graph({module})
    return {name: graph[name][0] for name in _closure(module, graph)}


def _refresh(folder: Path, stem: str, stamp: str, name: str, report: Callable[[str], None]) -> int:
    """Remove `stem`'s entries from `folder` and write `stamp` there, unless the folder's stamp
    already is `stamp`; returns how many files were removed. Raises `OSError`."""
    path = folder / stamp_name(stem)
    try:
        found = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        found = ""
    if found == stamp:
        return 0
    entries = [
        entry
        for entry in folder.iterdir()
        if entry.name.startswith(f"{stem}.")
        and f".{PYTHON_TAG}." in entry.name
        and entry.suffix in (".nbi", ".nbc")
    ]
    for entry in entries:
        entry.unlink(missing_ok=True)  # another process starting may have removed it first
    written = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    written.write_text(stamp, encoding="utf-8")
    os.replace(written, path)  # atomic: a process starting meanwhile reads the old or the new
    if entries:
        report(f"numba's cache {folder}: {name}: {_changes(found, stamp)}: compiling them again")
    return len(entries)


def _changes(found: str, stamp: str) -> str:
    """Why the `found` stamp is not the current `stamp`, in words."""
    if not found:
        return "its kernels were cached without a stamp"
    before = set(found.splitlines())
    changed = [line.split() for line in stamp.splitlines()[1:] if line not in before]
    named = [words[-1] if len(words[0]) == 64 else words[0] for words in changed]
    return f"{', '.join(named) or 'its stamp'} changed since its kernels were cached"


def _stamp(name: str, hashes: dict[str, str]) -> str:
    """The text that stamps `name`'s cached entries: the versions of what compiles them and the
    SHA-256 of each of its sources (`hashes`, by module name), one line each."""
    import numba  # noqa: PLC0415 (already imported by the kernels)
    import numpy  # noqa: PLC0415

    lines = [
        f"the sources of the entries of {name} in numba's cache",
        f"python {' '.join(sys.version.split())}",
        f"numba {numba.__version__}",
        f"numpy {numpy.__version__}",
        *(f"{hashes[source]} {source}" for source in sorted(hashes)),
    ]
    return "\n".join(lines) + "\n"


def _closure(name: str, graph: _Graph) -> set[str]:
    """`name` and every module of `graph` it imports, directly or through another."""
    found, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(graph[current][2])
    return found


def _import_graph(roots: set[str]) -> _Graph:
    """The `roots` and every module of their packages they import, directly or not: each one's
    source file, the file's SHA-256 and the modules of those packages it imports."""
    packages = {root.partition(".")[0] for root in roots}
    graph: _Graph = {}
    todo = sorted(roots)
    while todo:
        name = todo.pop()
        if name in graph:
            continue
        path = _source_file(name)
        source = Path(path).read_bytes()
        imported = _imported(name, source, path.endswith("__init__.py"), packages)
        graph[name] = (path, hashlib.sha256(source).hexdigest(), frozenset(imported))
        todo.extend(imported)
    return graph


def _imported(name: str, source: bytes, is_package: bool, packages: set[str]) -> set[str]:
    """The modules of `packages` that `source` (module `name`) imports at module level (what a
    compiled function can reach; an import in a function body runs only in Python): for ``from a
    import b``, the module a.b when there is one, else a (b is a name in it)."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _module_level(ast.parse(source).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = importlib.util.resolve_name("." * node.level + base, package)
            if base.partition(".")[0] in packages:
                found.update(_from_import(base, [alias.name for alias in node.names]))
    return {module for module in found if module.partition(".")[0] in packages}


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of `body` and of the blocks in it (``if``, ``try``, ``with``), not those of
    its functions and classes."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If | ast.With | ast.Try | ast.TryStar):
            handlers = getattr(statement, "handlers", [])
            for block in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(statement, block, []))
            for handler in handlers:
                yield from _module_level(handler.body)


def _from_import(base: str, names: list[str]) -> set[str]:
    """The modules ``from base import names`` reads: those of `names` that are submodules of the
    package `base`, and `base` itself when any name is not one."""
    spec = importlib.util.find_spec(base)
    if spec is None or spec.submodule_search_locations is None:
        return {base}
    submodules = {f"{base}.{n}" for n in names if importlib.util.find_spec(f"{base}.{n}")}
    return submodules | ({base} if len(submodules) < len(names) else set())


def _cached_dispatchers(name: str) -> list[Any]:
    """The numba functions module `name` defines that numba caches (``cache=True``); none when
    the module is not imported (only its Python code imports it)."""
    from numba.core.dispatcher import Dispatcher  # noqa: PLC0415 (imported by the kernels)

    module = sys.modules.get(name)
    if module is None:
        return []
    return [
        value
        for value in vars(module).values()
        if isinstance(value, Dispatcher)
        and value.py_func.__module__ == module.__name__
        and value.stats.cache_path is not None
    ]
