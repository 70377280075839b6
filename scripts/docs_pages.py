"""Build-time pages of the docs site (mkdocs-gen-files runs this on every ``mkdocs build``).

- ``reference/``: one page per module of ``airflow_provider_acid``, found by walking the
  package's folder (so a module that moves, appears or goes away needs no edit here), each page
  a mkdocstrings ``:::`` block rendered from the module's docstrings;
- ``SUMMARY.md``: the site's navigation (mkdocs-literate-nav). Guides come in the order below;
  any other page under ``docs/guides/`` is appended after them, named by its first heading, so
  a new guide needs no edit of mkdocs.yml or of this file.
"""

from __future__ import annotations

from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = "airflow_provider_acid"

#: Guides in reading order; pages not named here follow, sorted by file name.
GUIDE_ORDER = [
    "getting-started",
    "table-model",
    "cli",
    "metastore",
    "pruning",
    "compaction",
    "sinks",
    "airflow",
    "asset-watchers",
    "pruning-report",
    "openlineage",
    "example-dags",
    "reliability",
    "storage",
    "e2e",
    "local-airflow",
    "docker-compose",
    "airflow-versions",
    "packaging",
    "benchmarks",
    "development",
]


def title_of(page: Path) -> str:
    """The page's first level-one heading, else its file name."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page.stem.replace("-", " ").capitalize()


def modules() -> list[tuple[str, ...]]:
    """Every public module of the package as a dotted-name tuple, packages before their modules."""
    found = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1] == "__main__":
            continue
        if any(part.startswith("_") for part in parts):
            continue
        found.append(parts)
    return found


def reference_pages() -> list[str]:
    """Write one page per module; return their navigation lines, nested by package."""
    nav = []
    for parts in modules():
        rel = Path(*parts[1:])
        if ROOT.joinpath(*parts).is_dir():
            doc_path, source = Path("reference", rel, "index.md"), Path(*parts, "__init__.py")
        else:
            doc_path, source = Path("reference", rel).with_suffix(".md"), Path(*parts)
            source = source.with_suffix(".py")
        name = ".".join(parts)
        with mkdocs_gen_files.open(doc_path, "w") as page:
            page.write(f"# `{name}`\n\n::: {name}\n")
        mkdocs_gen_files.set_edit_path(doc_path, Path("..") / source)
        indent = "    " * len(parts)
        if doc_path.name == "index.md":  # a package: a section, its own page first
            nav.append(f"{indent}* {parts[-1]}")
            indent += "    "
        nav.append(f"{indent}* [{parts[-1]}]({doc_path.as_posix()})")
    return nav


def guide_pages() -> list[str]:
    pages = {p.stem: p for p in (DOCS / "guides").glob("*.md")}
    ordered = [pages.pop(stem) for stem in GUIDE_ORDER if stem in pages]
    ordered += [pages[stem] for stem in sorted(pages)]
    return [f"    * [{title_of(p)}](guides/{p.name})" for p in ordered]


def summary() -> str:
    lines = ["* [Home](index.md)", "* Guides", *guide_pages()]
    for stem, fallback in (("layout", "Architecture"), ("glossary", "Glossary")):
        page = DOCS / f"{stem}.md"
        if page.exists():
            lines.append(f"* [{title_of(page) or fallback}]({page.name})")
    lines += ["* API reference", *reference_pages()]
    return "\n".join(lines) + "\n"


with mkdocs_gen_files.open("SUMMARY.md", "w") as nav_file:
    nav_file.write(summary())
