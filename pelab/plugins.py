"""Plugins: position schemes, combiners and tasks from the user's own module, used by name as pelab's own.

A plugin is a Python file (``my_pe.py``) or a module importable from the path (``mylab.encodings``) whose classes
register themselves with pelab's decorators (``pelab.positions.register``, ``pelab.combine.register``,
``pelab.tasks.register``). Once loaded they are pelab's equals: configs validate them (a scheme's ``Options``
included: ``pelab.config.PositionConfig``), ``pelab list`` shows them, studies train them on both backends, the
report reads them, and ``pelab check`` holds them to the properties pelab's own classes pass.

**Identity.** What identifies a plugin's code is the sha256 of its source (a package: of its ``.py`` files, and of
the ``__init__.py`` of every package above it, all of which run when it is imported). A run's config records the
hash of each plugin its classes come from (``RunConfig.plugins``; left out for pelab's own classes, so no run id
from before changes): a changed plugin makes new runs and never mixes with the old code's. The run record
(``versions["plugins"]``) and the study folder (``meta["plugins"]``) keep the hash, the file, the plugin's
``__version__`` and, for a single file, its source.

**Nothing runs unasked.** Plugins are code. Naming a file on the command line (``--plugin``, ``pelab check FILE``)
is asking for it; a study file or a study folder received from someone else only *names* its plugins, and pelab
runs them when the command line confirms them: ``--plugin`` naming the same code (its hash is compared before a
line of it runs) or ``--trust-plugins``, which says what it runs. pelab refuses pickles for the same reason.

**Workers.** Worker processes (the local backend's, forked from ``pelab.forkserver``; Ray's, on other machines;
the report's) start without the driver's plugins. Each gets the code the driver loaded with its hash
(``carried``) and loads exactly that (``restore``), hash checked before it runs, before it reads any config.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pelab.combine import COMBINERS, Combiner
from pelab.config import option_conflict
from pelab.errors import PelabError, visible
from pelab.positions import SCHEMES, PositionScheme
from pelab.registry import Origin, Registry
from pelab.tasks import TASKS, Task

#: The registries a plugin may add to, by the config field that names their entries, with the base class each
#: entry must extend.
REGISTRIES: dict[str, tuple[Registry[Any], type]] = {
    "position": (SCHEMES, PositionScheme),
    "combine": (COMBINERS, Combiner),
    "task": (TASKS, Task),
}
#: A plugin is a module of source code; past this it is something else.
MAX_SOURCE_BYTES = 4 << 20


@dataclass(frozen=True)
class Source:
    """A plugin's code as read from disk (or carried from a driver), before any of it runs."""

    entry: str  # as the user named it: a file path or a dotted module
    name: str  # the module name, the key a run's config records it under
    file: str  # absolute path of its file (a package: its __init__.py)
    sha256: str
    text: bytes | None  # a single file's bytes, exactly what runs; None for a module imported by name
    kept: bool = False  # the copy a study folder kept (its file is gone or holds other code now)


@dataclass(frozen=True)
class Plugin:
    """A loaded plugin: its identity and what it registered."""

    name: str
    entry: str
    file: str
    sha256: str
    version: str | None
    provides: tuple[tuple[str, str], ...]  # (registry field, registered name)
    text: bytes | None

    @property
    def short(self) -> str:
        return self.sha256[:12]

    def describe(self) -> str:
        return f"{self.name} ({self.file}, sha256 {self.short}, version {self.version or 'none'})"

    def record(self, with_source: bool = True) -> dict[str, Any]:
        """What a study folder and a run record keep: the identity, and (single files) the source itself."""
        out: dict[str, Any] = {
            "name": self.name,
            "file": self.file,
            "sha256": self.sha256,
            "version": self.version,
            "provides": [f"{field}:{name}" for field, name in self.provides],
        }
        if with_source and self.text is not None:
            try:
                out["source"] = self.text.decode("utf-8")
            except UnicodeDecodeError:  # Python source is UTF-8 unless it says otherwise; such a file is not carried
                pass
        return out


#: Every plugin loaded in this process, by module name. Registries are process-wide (a class is registered when
#: its module runs), so this is too.
_LOADED: dict[str, Plugin] = {}


def loaded() -> dict[str, Plugin]:
    """The plugins loaded in this process, by module name, in load order."""
    return dict(_LOADED)


def digest(parts: list[tuple[str, bytes]]) -> str:
    """sha256 of a single file's bytes, or of several files' (relative path, bytes) in order."""
    if len(parts) == 1 and parts[0][0] == "":
        return hashlib.sha256(parts[0][1]).hexdigest()
    h = hashlib.sha256()
    for rel, data in parts:
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def _read(path: Path, entry: str) -> bytes:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise PelabError(f"plugins: {entry}: larger than {MAX_SOURCE_BYTES:,} bytes; a plugin is a module of code")
        return path.read_bytes()
    except OSError as e:
        raise PelabError(f"plugins: {entry}: cannot read {path} ({e.strerror})") from None


def is_file_entry(entry: str) -> bool:
    """A file path (``my_pe.py``, ``dir/my_pe``) rather than a dotted module name (``mylab.encodings``)."""
    return entry.endswith(".py") or "/" in entry or os.sep in entry


def module_name(entry: str) -> str:
    """The module name an entry loads as: a file's stem, or the dotted name itself."""
    return Path(entry).stem if is_file_entry(entry) else entry


def resolve(entry: str, base: str | Path | None = None) -> Source:
    """Read (never run) the code ``entry`` names: a file, relative to ``base`` (a study file's folder) or the
    current folder, or a dotted module found on ``sys.path`` without importing anything."""
    if not isinstance(entry, str) or not entry.strip() or not entry.isprintable() or len(entry) > 4096:
        raise PelabError(f"plugins: {entry!r:.80} is not a file path or a dotted module name")
    if is_file_entry(entry):
        path = Path(entry).expanduser()
        if not path.is_absolute():
            path = Path(base or Path.cwd()) / path
        if not path.is_file():
            raise PelabError(f"plugins: {entry}: no such file ({path})")
        name = path.stem
        if not name.isidentifier():
            raise PelabError(f"plugins: {entry}: {name!r} is not a Python module name; rename the file")
        text = _read(path, entry)
        return Source(entry, name, str(path.resolve()), digest([("", text)]), text)
    parts = entry.split(".")
    if not all(p.isidentifier() for p in parts):
        raise PelabError(f"plugins: {entry}: not a file (end it in .py) nor a dotted module name")
    for root in sys.path:
        here = Path(root or Path.cwd())
        leaf = here.joinpath(*parts)
        if not (leaf.with_suffix(".py").is_file() or (leaf / "__init__.py").is_file()):
            continue
        files = [here.joinpath(*parts[:i], "__init__.py") for i in range(1, len(parts))]
        if leaf.with_suffix(".py").is_file():
            files.append(leaf.with_suffix(".py"))
            main = leaf.with_suffix(".py")
        else:
            main = leaf / "__init__.py"
            files += sorted(p for p in leaf.rglob("*.py") if "__pycache__" not in p.parts)
        parts_read = [(f.relative_to(here).as_posix(), _read(f, entry)) for f in files if f.is_file()]
        return Source(entry, entry, str(main.resolve()), digest(parts_read), None)
    raise PelabError(f"plugins: {entry}: no module of that name on the Python path (or give its file, ending in .py)")


def _registered() -> set[tuple[str, str]]:
    return {(field, name) for field, (reg, _) in REGISTRIES.items() for name in reg}


def _undo(before: set[tuple[str, str]]) -> None:
    for field, name in _registered() - before:
        REGISTRIES[field][0].forget(name)


def _where(e: BaseException, file: str) -> str:
    """The plugin's own line an exception was raised from, when it was."""
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == file]
    return f" (line {lines[-1]})" if lines else ""


#: What a plugin's class may be registered as: it is written in study files and on command lines, and shown in
#: tables and reports (pelab's own: ``concat_split``, ``t5``).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


def activate(src: Source) -> Plugin:
    """Run a plugin's code (its registrations with it) and record where its classes came from; the same code
    loaded already is a no-op. A plugin that fails to import, registers a taken name, registers nothing or
    declares a scheme option otherwise than pelab does leaves nothing registered and ends as one PelabError
    naming it."""
    have = _LOADED.get(src.name)
    if have is not None:
        if have.sha256 == src.sha256:
            return have
        raise PelabError(
            f"plugins: {src.entry}: another {src.name} (sha256 {have.short}, {have.file}) is loaded already; one "
            "process runs one version of a plugin"
        )
    if src.text is not None and src.name in sys.modules:
        other = getattr(sys.modules[src.name], "__file__", None) or "built in"
        raise PelabError(f"plugins: {src.entry}: a module named {src.name!r} is imported already ({other}); rename it")
    before = _registered()
    try:
        if src.text is not None:
            module = types.ModuleType(src.name)
            module.__file__ = src.file
            sys.modules[src.name] = module
            exec(compile(src.text, src.file, "exec"), module.__dict__)  # the bytes that were hashed, no other
        else:
            module = importlib.import_module(src.name)
    except KeyboardInterrupt:
        _undo(before)
        sys.modules.pop(src.name, None)
        raise
    except BaseException as e:  # noqa: BLE001 - whatever the user's code raises (SystemExit too) is about it
        _undo(before)
        sys.modules.pop(src.name, None)
        first = (str(e).strip().splitlines() or [""])[0]
        raise PelabError(f"plugins: {src.entry}: {type(e).__name__}: {first}{_where(e, src.file)}") from None
    new = sorted(_registered() - before)
    problem = (
        None
        if new
        else (
            "registers no position scheme, combiner or task (decorate its classes with pelab.positions.register, "
            "pelab.combine.register or pelab.tasks.register)"
        )
    )
    for field, name in new:
        reg, base = REGISTRIES[field]
        if not NAME.fullmatch(name):
            problem = (
                f"{field} {visible(name)!r:.60}: a name is letters, digits and _ . + - (at most 64, starting with a "
                "letter or digit), since study files, the command line and reports name it"
            )
        elif not (isinstance(reg[name], type) and issubclass(reg[name], base)):
            problem = f"{field} {name!r} is not a subclass of {base.__module__}.{base.__name__}"
        elif field == "position" and (why := option_conflict(reg[name])) is not None:
            problem = f"scheme {name!r}: {why}"
    if problem is not None:
        _undo(before)
        sys.modules.pop(src.name, None)
        raise PelabError(f"plugins: {src.entry}: {problem}")
    for field, name in new:
        REGISTRIES[field][0].origins[name] = Origin(src.name, src.sha256)
    version = getattr(module, "__version__", None)
    plugin = Plugin(src.name, src.entry, src.file, src.sha256, None if version is None else str(version)[:80],
                    tuple(new), src.text)  # fmt: skip
    _LOADED[src.name] = plugin
    return plugin


def load(entry: str, base: str | Path | None = None) -> Plugin:
    """Read and run the plugin ``entry`` names: the user named it, which is what asking for its code means."""
    return activate(resolve(entry, base))


def load_named(entries: list[str] | None) -> list[Plugin]:
    """``--plugin`` on the command line, each loaded in order."""
    return [load(str(e)) for e in entries or []]


def _shown(path: str) -> str:
    """A path as the user would type it here: relative to the current folder when it lies below it."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    except ValueError:
        return path


def _how_to(what: str, sources: list[Source]) -> str:
    """One line for every plugin that waits for a yes, so a study of four plugins is confirmed in one try."""
    here = [s for s in sources if Path(s.file).is_file()]
    gone = [s for s in sources if not Path(s.file).is_file()]
    codes = ", ".join(f"{s.entry} (sha256 {s.sha256[:12]})" for s in sources)
    ways = [" ".join(f"--plugin {_shown(s.file)}" for s in here)] if here else []
    if gone:
        ways.append(
            f"--plugin YOUR_COPY for {', '.join(s.name for s in gone)} (recorded at {', '.join(s.file for s in gone)}, "
            "no longer there)"
        )
    return (
        f"plugins: {what} runs code from {codes}, and pelab runs a plugin only when you say so: add "
        f"{' and '.join(ways)} (or --trust-plugins)"
    )


def _announce(src: Source, what: str) -> None:
    whose = f"the folder's kept copy of {src.file} (that file is gone or holds other code)" if src.kept else src.file
    print(f"pelab: plugins: running {whose} (sha256 {src.sha256[:12]}) as {what} asks (--trust-plugins)",
          file=sys.stderr, flush=True)  # fmt: skip


def gate(sources: list[Source], trust: bool, what: str) -> list[Plugin]:
    """The plugins a study names, each already loaded with the same code (named on the command line), or run now
    when ``trust`` (said in one line); otherwise one PelabError saying how to confirm it, and nothing has run."""
    out = []
    waiting = [s for s in sources if s.name not in _LOADED]
    if waiting and not trust:
        raise PelabError(_how_to(what, waiting))
    for src in sources:
        have = _LOADED.get(src.name)
        if have is not None and have.sha256 != src.sha256:
            raise PelabError(
                f"plugins: {src.entry}: the {src.name} loaded (sha256 {have.short}, {have.file}) is not the code "
                f"{what} names (sha256 {src.sha256[:12]}, {src.file})"
            )
        if have is None:
            _announce(src, what)
        out.append(activate(src))
    return out


def from_record(record: dict[str, Any]) -> Source:
    """The code a study folder recorded (``Plugin.record``): the recorded file where it still holds that code,
    else the source the folder kept; the hash is checked either way."""
    name, sha, file = str(record.get("name")), str(record.get("sha256")), str(record.get("file"))
    candidates = [file] if Path(file).is_file() else []
    if not is_file_entry(name):
        candidates.append(name)  # a module by name: what the path holds now
    for entry in candidates:
        try:
            found = resolve(entry)
        except PelabError:
            continue
        if found.sha256 == sha and found.name == name:
            return found
    text = record.get("source")
    if isinstance(text, str) and digest([("", text.encode("utf-8"))]) == sha:
        return Source(file, name, file, sha, text.encode("utf-8"), kept=True)
    raise PelabError(
        f"plugins: {name} (sha256 {sha[:12]}) is neither at {file} nor kept by the study folder; name your copy of "
        "the same code with --plugin"
    )


def confirm_recorded(records: list[dict[str, Any]], named: list[str] | None, trust: bool, what: str) -> list[Plugin]:
    """A study folder's plugins (``meta["plugins"]``) before ``pelab report``, ``results`` or a resumed ``study``
    reads its runs: each must be named on the command line (``--plugin``, compared to the recorded hash before it
    runs) or trusted (``--trust-plugins``: the recorded file or the kept source, hash checked); otherwise one
    PelabError says how, and nothing has run."""
    wanted = {str(r.get("name")): r for r in records}
    given = {}
    for entry in named or []:
        src = resolve(str(entry))
        if src.name not in wanted:
            raise PelabError(f"plugins: {entry} is not among {what}'s plugins ({', '.join(wanted) or 'none'})")
        sha = str(wanted[src.name].get("sha256"))
        if src.sha256 != sha:
            raise PelabError(
                f"plugins: {entry}: its sha256 {src.sha256[:12]} is not the {sha[:12]} {what}'s runs were made with; "
                "name the file they were made with (or --trust-plugins runs the copy the folder kept)"
            )
        given[src.name] = src
    ready = {n for n, r in wanted.items() if n in given or getattr(_LOADED.get(n), "sha256", None) == r.get("sha256")}
    if not trust and len(ready) < len(wanted):
        waiting = [Source(n, n, str(r.get("file")), str(r.get("sha256")), None) for n, r in wanted.items()
                   if n not in ready]  # fmt: skip
        raise PelabError(_how_to(what, waiting))
    out = []
    for name, record in wanted.items():
        have = _LOADED.get(name)
        if have is not None and have.sha256 == record.get("sha256"):
            out.append(have)
            continue
        if name in given:
            out.append(activate(given[name]))
            continue
        src = from_record(record)
        _announce(src, what)
        out.append(activate(src))
    return out


def carried() -> list[dict[str, Any]]:
    """What a worker process needs to load the same plugins: each one's name, file, hash and (single files) the
    very bytes the driver ran."""
    return [{"name": p.name, "entry": p.entry, "file": p.file, "sha256": p.sha256, "text": p.text}
            for p in _LOADED.values()]  # fmt: skip


def restore(items: list[dict[str, Any]] | None) -> None:
    """In a worker: load the driver's plugins (``carried``) before reading any config. A file's bytes are checked
    against their hash; a module imported by name must be the same code on this machine."""
    for c in items or []:
        text = c.get("text")
        if text is not None:
            if digest([("", text)]) != c["sha256"]:
                raise PelabError(f"plugins: {c['name']}: the code received is not its sha256 {c['sha256'][:12]}")
            activate(Source(c["entry"], c["name"], c["file"], c["sha256"], text))
            continue
        src = resolve(c["name"])
        if src.sha256 != c["sha256"]:
            raise PelabError(
                f"plugins: {c['name']}: the module on this machine (sha256 {src.sha256[:12]}) is not the driver's "
                f"({c['sha256'][:12]}); install the same code on every node"
            )
        activate(src)


def unload(name: str) -> None:
    """Forget a plugin: its registrations, its module and its record (tests load plugins into one process and
    must leave the registries as they found them; a real command never needs it)."""
    plugin = _LOADED.pop(name, None)
    if plugin is None:
        return
    for field, registered in plugin.provides:
        REGISTRIES[field][0].forget(registered)
    sys.modules.pop(name, None)


def records_for(names: list[str] | set[str], with_source: bool = True) -> list[dict[str, Any]]:
    """The records of loaded plugins by name (a study's, a run's), sorted by name."""
    return [_LOADED[n].record(with_source) for n in sorted(names) if n in _LOADED]
