"""The documentation site (`make docs`): `mkdocs build --strict` gives no
warning (broken links and anchors, pages left out of the navigation,
docstrings Griffe cannot parse), every public name has a page in the API
reference (docs/api/), the docstrings' examples render as code, and the
README's links into docs/ lead to pages and headings that exist."""

import importlib
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest
from helpers import tensorflow_pass_only

import kerasbert

pytestmark = tensorflow_pass_only

ROOT = pathlib.Path(__file__).parents[1]
API = ROOT / "docs" / "api"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built as `make docs` builds it, into a new directory."""
    directory = tmp_path_factory.mktemp("site")
    environ = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's notice about its successor
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(directory)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=environ,
    )
    return directory, result


def test_build_has_no_warning(site):
    directory, result = site
    output = result.stdout + result.stderr
    problems = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not problems, "\n".join(problems) or output[-3000:]
    assert (directory / "index.html").is_file() and (directory / "api" / "tasks.html").is_file()


def public_names():
    """{"kerasbert.NAME" or "kerasbert.MODULE.NAME": object} of every name in
    `kerasbert.__all__` and in its modules' `__all__` (a module without one:
    the public names it defines)."""
    names = {}
    for name in kerasbert.__all__:
        value = getattr(kerasbert, name)
        if not inspect.ismodule(value):
            names[f"kerasbert.{name}"] = value
            continue
        exported = getattr(value, "__all__", None)
        if exported is None:
            exported = [n for n, v in vars(value).items()
                        if not n.startswith("_") and getattr(v, "__module__", None) == value.__name__]
        for member in exported:
            names[f"kerasbert.{name}.{member}"] = getattr(value, member)
    return names


def resolve(path):
    """The object a dotted path names: its longest importable module, then
    attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for part in parts[i:]:
            value = getattr(value, part)
        return value
    raise ModuleNotFoundError(path)


def documented():
    """{dotted path: page} of every `::: path` directive in docs/api/."""
    return {match: page.name for page in sorted(API.glob("*.md"))
            for match in re.findall(r"^::: *(\S+)", page.read_text(), re.MULTILINE)}


def test_every_public_name_has_a_page():
    pages = {id(resolve(path)) for path in documented()}
    missing = sorted(name for name, value in public_names().items() if id(value) not in pages)
    assert not missing, f"add a `::: <module>.<name>` directive for these to a page in docs/api/: {missing}"


def test_examples_render_as_code(site):
    """Doctests written flush with their `Examples:` header
    (tools/docstring_examples.py), and descriptions that start with `>`,
    would render as quotes."""
    directory, result = site
    assert result.returncode == 0
    quoted = [page.name for page in sorted((directory / "api").glob("*.html")) if "<blockquote>" in page.read_text()]
    assert not quoted, f"quoted text (a `>>>` example or a `>` line in a docstring) in {quoted}"
    assert '<span class="gp">&gt;&gt;&gt; </span>' in (directory / "api" / "encoder.html").read_text()


def test_readme_links_into_docs_resolve(site):
    directory, result = site
    assert result.returncode == 0
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", (ROOT / "README.md").read_text())
    assert links
    for target, anchor in links:
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"
        if target.endswith(".md") and anchor:
            page = directory / pathlib.Path(target).relative_to("docs").with_suffix(".html")
            assert f'id="{anchor}"' in page.read_text(), f"README.md links to {target}#{anchor}: no such heading"
