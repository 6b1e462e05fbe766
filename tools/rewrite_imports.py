#!/usr/bin/env python3
"""Rewrite Python files to the module names of a rename map (tools/renames-37.json).

    python tools/rewrite_imports.py FILE...            rewrite these files in place
    python tools/rewrite_imports.py --check FILE...    say what would change; exit 1 if anything
    python tools/rewrite_imports.py --apply-moves      git mv every file the map moves (new
                                                       rooms, launchers), then rewrite every
                                                       tracked Python file and pyproject.toml

What is rewritten, in a file of the repository (its module name comes from its path:
shadertune/a/b.py is shadertune.a.b):

- import statements, absolute (`import shadertune.api`, `from shadertune.config import
  Config`, `from shadertune import select`) and relative inside the package (`from
  ..config import Config`, resolved against the file's own package); a name imported
  from a package that is itself a moved module becomes `from NEW_PARENT import NEW as
  NAME`, so the names a file uses stay the same; a statement whose names go to
  different places is split, one statement a place;
- dotted names in code (`shadertune.api.backend(...)`);
- string literals that are a module path, `module:attr` or `module.attr` (monkeypatch
  targets, `-m` arguments, console scripts), unless the map keeps them as written
  ('kept_strings': entry points kept as forwarders, logger names);
- in pyproject.toml, every dotted shadertune name inside a quoted string (contracts,
  console scripts).

A file holding the line "# rewrite_imports: leave this file" is left as it is (its old
names are data, as in this tool's tests).

A file that moved keeps the names it imports: its relative imports are resolved
against the package it came from (--apply-moves knows it; a single file at a new
path is resolved against its new package first and, where that names no module,
against the one it came from).  Comments after an import stay on its last line.

Applying the renames to another branch (before merging the branch that made them):
    git checkout wip/OTHER
    git show main:tools/rewrite_imports.py > /tmp/rewrite_imports.py
    git show main:tools/renames-37.json > /tmp/renames-37.json
    python /tmp/rewrite_imports.py --map /tmp/renames-37.json --apply-moves
    git add -A && git commit -m "Apply the issue-37 renames"   # then: git merge main
or after merging: python tools/rewrite_imports.py $(git diff --name-only BASE -- '*.py').
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import pathlib
import re
import subprocess
import sys
import tokenize

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_MAP = HERE / "renames-37.json"
ROOT_PACKAGE = "shadertune"
DOTTED = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)((?::[A-Za-z_][\w.]*)?)$")
TOML_NAME = re.compile(rf"\b{ROOT_PACKAGE}(?:\.[A-Za-z_]\w*)+")


class Renames:
    """The map: old dotted module -> new, by longest prefix."""

    def __init__(self, data: dict):
        self.modules: dict[str, str] = dict(data.get("modules", {}))
        self.files: dict[str, dict] = dict(data.get("files", {}))
        self.packages: dict[str, str] = dict(data.get("packages", {}))
        self.kept: set[str] = set(data.get("kept_strings", []))
        self.reverse = {v: k for k, v in self.modules.items()}

    @classmethod
    def load(cls, path) -> "Renames":
        return cls(json.loads(pathlib.Path(path).read_text()))

    def new(self, name: str) -> str | None:
        """The new name of module (or module.attribute) `name`, None when it did not move."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head in self.modules:
                return ".".join([self.modules[head], *parts[i:]])
        return None

    def old(self, name: str) -> str | None:
        """The old name of a module that moved here (or of a submodule of one)."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head in self.reverse:
                return ".".join([self.reverse[head], *parts[i:]])
        return None


# --- where a file sits ------------------------------------------------------------
def module_of(path: pathlib.Path, root: pathlib.Path) -> tuple[str | None, bool]:
    """(dotted module name, is a package __init__) of a file under root's package;
    (None, False) for a file outside it (tests, scripts)."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None, False
    if not rel.parts or rel.parts[0] != ROOT_PACKAGE or rel.suffix != ".py":
        return None, False
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def package_of(module: str, is_init: bool) -> str:
    return module if is_init else module.rpartition(".")[0]


def exists(module: str, root: pathlib.Path) -> bool:
    if not module.startswith(ROOT_PACKAGE):
        return False
    p = root.joinpath(*module.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def resolve(package: str, level: int, module: str | None) -> str:
    """The absolute name of `from .{level}module import ...` in `package`."""
    base = package.split(".")
    if level > 1:
        if level - 1 > len(base) - 1:
            raise ValueError(f"relative import beyond {ROOT_PACKAGE}: level {level} in {package}")
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def relative(package: str, target: str) -> tuple[int, str]:
    """(level, module) of `target` as a relative import from `package`."""
    p, t = package.split("."), target.split(".")
    common = 0
    while common < min(len(p), len(t)) and p[common] == t[common]:
        common += 1
    return len(p) - common + 1, ".".join(t[common:])


# --- the rewriting ------------------------------------------------------------------
class FileRewriter:
    def __init__(self, renames: Renames, root: pathlib.Path, path: pathlib.Path,
                 came_from: str | None = None, moved_to: str | None = None):
        """`came_from`: the module this file was before it moved (relative imports are
        resolved against its package); `moved_to`: the module it will be (relative
        imports are written for that package)."""
        self.r, self.root, self.path = renames, root, path
        module, is_init = module_of(path, root)
        self.is_init = is_init
        self.module = moved_to or module
        old = came_from or (renames.old(module) if module and renames.old(module) else None)
        self.old_package = package_of(old, is_init) if old else None
        self.package = package_of(self.module, is_init) if self.module else None
        # a moved file whose relative imports are known to be the old package's
        self.resolve_old_first = came_from is not None
        self.warnings: list[str] = []

    def _absolute(self, level: int, module: str | None) -> tuple[str, str | None]:
        """(absolute target, the package it was resolved against) of an import: a
        moved file's relative imports against the package it came from (when known, or
        where its own package names no such module)."""
        if not level:
            return module or "", None
        if self.resolve_old_first:
            return resolve(self.old_package, level, module), self.old_package
        tried = []
        for pkg in [p for p in (self.package, self.old_package) if p]:
            try:
                name = resolve(pkg, level, module)
            except ValueError:
                continue
            tried.append((name, pkg))
            if exists(name, self.root) or self.r.new(name):
                return name, pkg
        if not tried:
            raise ValueError(f"{self.path}: cannot resolve a relative import (level {level}, {module})")
        self.warnings.append(f"{self.path}: relative import {'.' * level}{module or ''} names no module "
                             f"({tried[0][0]})")
        return tried[0]

    def _emit_module(self, target: str, relative_form: bool) -> str:
        """`target` as a from-import's module text."""
        if relative_form and self.package and target.startswith(ROOT_PACKAGE) \
                and target.split(".")[0] == self.package.split(".")[0]:
            level, rest = relative(self.package, target)
            return "." * level + rest
        return target

    def _import_from(self, node: ast.ImportFrom) -> list[str] | str | None:
        """The statements replacing `node`, its new module's text alone (a str: the
        names stay as written), or None when it stays."""
        if node.module == "__future__":
            return None
        target, resolved_in = self._absolute(node.level, node.module)
        rel_form = node.level > 0 and self.package is not None
        new_target = self.r.new(target) or target
        groups: dict[tuple[str, bool], list[str]] = {}
        order: list[tuple[str, bool]] = []
        for alias in node.names:
            full = f"{target}.{alias.name}"
            moved = self.r.new(full) if alias.name != "*" and full in self.r.modules else None
            if moved:           # a moved module imported by name: from its new parent
                parent, _, leaf = moved.rpartition(".")
                key = (parent, True) if parent else (moved, False)
                if parent:
                    text = leaf if leaf == (alias.asname or alias.name) else \
                        f"{leaf} as {alias.asname or alias.name}"
                else:           # a top-level script module: `import NAME as ALIAS`
                    text = moved if moved == (alias.asname or alias.name) else \
                        f"{moved} as {alias.asname or alias.name}"
            else:
                key = (new_target, True)
                text = alias.name if not alias.asname else f"{alias.name} as {alias.asname}"
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(text)
        relocated = node.level > 0 and resolved_in != self.package    # written for another package
        if len(order) == 1 and order[0][0] == target and order[0][1] and not relocated:
            return None
        if len(order) == 1 and order[0][1] and all(
                " as " not in t or t.split(" as ")[0] in {a.name for a in node.names} for t in groups[order[0]]):
            # the same names from another module: only the module's text changes
            return self._emit_module(order[0][0], rel_form)
        out = []
        for mod, is_from in order:
            names = groups[(mod, is_from)]
            if not is_from:
                out.extend(f"import {n}" for n in names)
                continue
            out.append(f"from {self._emit_module(mod, rel_form)} import {', '.join(names)}")
        return out

    def _import(self, node: ast.Import) -> list[str] | None:
        """`import a.b [as c], ...` with each moved name replaced (the dotted names the
        file then uses are rewritten with it, in _tokens)."""
        changed, names = False, []
        for alias in node.names:
            new = self.r.new(alias.name)
            changed = changed or new is not None
            name = new or alias.name
            names.append(name if not alias.asname else f"{name} as {alias.asname}")
        return [f"import {', '.join(names)}"] if changed else None

    def rewrite(self, text: str) -> str:
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            self.warnings.append(f"{self.path}: not Python ({e.msg}, line {e.lineno}); left as it is")
            return text
        lines = text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))

        def at(lineno, col):
            return offsets[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))

        edits: list[tuple[int, int, str]] = []
        spans: list[tuple[int, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                start, end = at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)
                spans.append((start, end))
                new = self._import_from(node) if isinstance(node, ast.ImportFrom) else self._import(node)
                if new is None:
                    continue
                if isinstance(new, str):
                    m = re.match(r"from\s+(\.*[\w.]*)\s", text[start:end])
                    edits.append((start + m.start(1), start + m.end(1), new))
                    continue
                indent = " " * node.col_offset
                edits.append((start, end, ("\n" + indent).join(new)))
        edits.extend(self._tokens(text, offsets, spans))
        for start, end, new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        return text

    def _tokens(self, text, offsets, spans):
        """Dotted names in code and module-path strings, outside import statements."""
        def pos(tok_pos):
            line, col = tok_pos
            return offsets[line - 1] + col      # tokenize's columns count characters

        def inside(p):
            return any(s <= p < e for s, e in spans)
        try:
            toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return []
        edits = []
        i = 0
        while i < len(toks):
            t = toks[i]
            if t.type == tokenize.NAME and t.string == ROOT_PACKAGE and not inside(pos(t.start)) \
                    and not (i > 0 and toks[i - 1].type == tokenize.OP and toks[i - 1].string == "."):
                j, parts = i, [t.string]
                while j + 2 < len(toks) and toks[j + 1].string == "." and toks[j + 2].type == tokenize.NAME:
                    parts.append(toks[j + 2].string)
                    j += 2
                if len(parts) > 1:
                    new = self.r.new(".".join(parts))
                    if new:
                        edits.append((pos(t.start), pos(toks[j].end), new))
                i = j + 1
                continue
            if t.type == tokenize.STRING and not inside(pos(t.start)):
                new = self._string(t.string)
                if new is not None:
                    edits.append((pos(t.start), pos(t.end), new))
            i += 1
        return edits

    def _string(self, token: str) -> str | None:
        m = re.match(r"^([rRuU]?)('{3}|\"{3}|'|\")(.*)\2$", token, re.S)
        if not m:
            return None
        prefix, quote, body = m.groups()
        code = self._code_in_string(body)
        if code != body:
            return f"{prefix}{quote}{code}{quote}"
        if "\\" in body or "\n" in body:
            return None
        d = DOTTED.match(body)
        if not d or body in self.r.kept or not body.startswith(ROOT_PACKAGE + "."):
            return None
        new = self.r.new(d.group(1))
        if new is None:
            return None
        return f"{prefix}{quote}{new}{d.group(2)}{quote}"

    def _code_in_string(self, body: str) -> str:
        """Import statements inside a string of code (a child process's program):
        `from shadertune.x import a, b` and `import shadertune.x`; a statement whose
        names go apart is split with '; '."""
        def from_import(m):
            node = ast.ImportFrom(module=m.group(1), level=0, names=[
                ast.alias(name=n.split(" as ")[0].strip(),
                          asname=n.split(" as ")[1].strip() if " as " in n else None)
                for n in m.group(2).split(",")])
            new = self._import_from(node)
            if new is None:
                return m.group(0)
            if isinstance(new, str):
                return f"from {new} import {m.group(2)}"
            return "; ".join(new)
        def plain_import(m):
            items = []
            for item in m.group(1).split(","):
                name, _, alias = item.strip().partition(" as ")
                new = self.r.new(name) if name.startswith(ROOT_PACKAGE + ".") else None
                items.append((new or name) + (f" as {alias}" if alias else ""))
            return "import " + ", ".join(items) if any(
                self.r.new(i.strip().partition(" as ")[0]) for i in m.group(1).split(",")
                if i.strip().startswith(ROOT_PACKAGE + ".")) else m.group(0)
        body = FROM_IN_CODE.sub(from_import, body)
        return IMPORT_IN_CODE.sub(plain_import, body)


FROM_IN_CODE = re.compile(rf"\bfrom ({ROOT_PACKAGE}(?:\.\w+)*) import (\w+(?: as \w+)?(?:, *\w+(?: as \w+)?)*)")
IMPORT_IN_CODE = re.compile(r"\bimport ([\w.]+(?: as \w+)?(?:, *[\w.]+(?: as \w+)?)*)")


def rewrite_toml(text: str, renames: Renames) -> str:
    """Every dotted shadertune name inside a quoted string: in pyproject.toml they name
    modules (contracts, console scripts), never loggers."""
    def one_string(m):
        return TOML_NAME.sub(lambda n: renames.new(n.group(0)) or n.group(0), m.group(0))
    return re.sub(r'"[^"\n]*"', one_string, text)


# --- files ------------------------------------------------------------------------
def is_python(path: pathlib.Path) -> bool:
    if path.suffix == ".py":
        return True
    if path.suffix or not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


SKIP_MARK = "# rewrite_imports: leave this file"


def rewrite_file(path: pathlib.Path, renames: Renames, root: pathlib.Path, *, check: bool = False,
                 came_from: str | None = None) -> tuple[bool, list[str]]:
    text = path.read_text()
    if SKIP_MARK in text:        # a file whose old names are data (this tool's own tests)
        return False, []
    if path.name == "pyproject.toml":
        new, warnings = rewrite_toml(text, renames), []
    else:
        fr = FileRewriter(renames, root, path, came_from=came_from)
        new, warnings = fr.rewrite(text), fr.warnings
    if new != text and not check:
        path.write_text(new)
    return new != text, warnings


def git(root: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


LAUNCHER = '''#!/usr/bin/env python3
"""scripts/{target} under the name the README, docs and BENCHMARKS.md use."""
import pathlib, runpy  # noqa: E401
runpy.run_path(str(pathlib.Path(__file__).with_name("{target}")), run_name="__main__")
'''


def module_path(module: str, root: pathlib.Path) -> pathlib.Path | None:
    p = root.joinpath(*module.split("."))
    if p.with_suffix(".py").is_file():
        return p.with_suffix(".py")
    if (p / "__init__.py").is_file():
        return p
    return None


def target_path(module: str, root: pathlib.Path, is_package: bool) -> pathlib.Path:
    p = root.joinpath(*module.split("."))
    return p if is_package else p.with_suffix(".py")


def apply_moves(renames: Renames, root: pathlib.Path) -> dict[pathlib.Path, str]:
    """git mv every module and file the map moves that is still at its old place; write
    the new rooms' __init__.py and the launchers.  Returns {new path: old module} of
    the moved Python modules (their relative imports are the old package's)."""
    came_from: dict[pathlib.Path, str] = {}
    for rel, text in renames.packages.items():
        p = root / rel
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            git(root, "add", rel)
    for old, new in renames.modules.items():
        src = module_path(old, root)
        if src is None or not new.startswith(ROOT_PACKAGE):
            continue
        dst = target_path(new, root, src.is_dir())
        dst.parent.mkdir(parents=True, exist_ok=True)
        git(root, "mv", str(src.relative_to(root)), str(dst.relative_to(root)))
        if dst.is_dir():
            for f in dst.rglob("*.py"):
                sub = f.relative_to(dst).with_suffix("").parts
                sub = sub[:-1] if sub[-1] == "__init__" else sub
                came_from[f] = ".".join([old, *sub])
        else:
            came_from[dst] = old
    for old, spec in renames.files.items():
        src, dst = root / old, root / spec["to"]
        if not src.exists() or dst.exists():
            continue
        git(root, "mv", old, spec["to"])
        mod = old[:-3].replace("/", ".") if old.endswith(".py") else None
        if mod in renames.modules:
            came_from[dst] = mod
        if spec.get("launcher"):
            src.write_text(LAUNCHER.format(target=dst.name))
            src.chmod(0o755)
            git(root, "add", old)
    return came_from


def tracked_files(root: pathlib.Path) -> list[pathlib.Path]:
    names = git(root, "ls-files", "-z").split("\0")
    return [root / n for n in names if n and (root / n).is_file()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/rewrite_imports.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=pathlib.Path, help="Python files (or pyproject.toml) to rewrite")
    ap.add_argument("--map", type=pathlib.Path, default=DEFAULT_MAP, help=f"the rename map (default {DEFAULT_MAP.name})")
    ap.add_argument("--root", type=pathlib.Path, help="the repository root (default: git's, from here)")
    ap.add_argument("--check", action="store_true", help="change nothing; list the files that would change")
    ap.add_argument("--apply-moves", action="store_true",
                    help="git mv what the map moves, then rewrite every tracked Python file and pyproject.toml")
    a = ap.parse_args(argv)
    root = a.root or pathlib.Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                                                 capture_output=True, text=True).stdout.strip())
    root = root.resolve()
    renames = Renames.load(a.map)
    came_from: dict[pathlib.Path, str] = {}
    files = [f.resolve() if f.is_absolute() else (pathlib.Path.cwd() / f).resolve() for f in a.files]
    if a.apply_moves:
        if a.check:
            ap.error("--check and --apply-moves do not go together")
        came_from = {p.resolve(): m for p, m in apply_moves(renames, root).items()}
        files = [f for f in tracked_files(root) if is_python(f) or f.name == "pyproject.toml"]
    if not files:
        ap.error("name the files to rewrite, or --apply-moves")
    changed, warnings = [], []
    for f in files:
        if not (is_python(f) or f.name == "pyproject.toml"):
            warnings.append(f"{f}: not a Python file; left as it is")
            continue
        did, w = rewrite_file(f, renames, root, check=a.check, came_from=came_from.get(f))
        warnings.extend(w)
        if did:
            changed.append(f)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    verb = "would change" if a.check else "changed"
    for f in changed:
        print(f"{verb}: {f.relative_to(root) if f.is_relative_to(root) else f}")
    print(f"{len(changed)} of {len(files)} files {verb}", file=sys.stderr)
    return 1 if a.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
