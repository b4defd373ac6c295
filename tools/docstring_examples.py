"""A Griffe extension for the API reference (mkdocs.yml): doctest examples as code.

The docstrings write their doctests flush with the `Examples:` header, as
doctest reads them:

    Examples:
    >>> encoder.count_params()
    4385920

Google-style sections hold indented lines only, so Griffe would end the
section at the header and Markdown would read `>>>` as three nested
quotes. Before Griffe parses a docstring, this indents what follows an
`Examples:` header up to the next section header, and puts any other
paragraph that starts with `>>>` in a `pycon` code block. The source
files are not changed.
"""

import re

import griffe

_SECTION = re.compile(
    r"(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Other Parameters|Returns|Yields|Receives|Raises|"
    r"Warns|Attributes|Methods|Functions|Classes|Modules|Examples?|Notes?|Warnings?|See Also|References|Todo):"
)


def _indent(line):
    return len(line) - len(line.lstrip())


def examples_as_code(text):
    """`text` (a docstring, dedented) with its doctests readable by Griffe's
    Google-style parser and by Markdown."""
    lines = text.split("\n")
    out = []
    fenced = False  # inside a ``` block the docstring wrote itself
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        if not fenced and stripped in ("Examples:", "Example:"):
            out.append(line)
            level = _indent(line)
            i += 1
            # Everything up to the next section header at this level (or a line left of it) is the section's.
            while i < len(lines) and not (lines[i].strip() and _indent(lines[i]) < level) and not (
                    _indent(lines[i]) == level and _SECTION.fullmatch(lines[i].strip())):
                if lines[i].strip() and _indent(lines[i]) == level:
                    out.append(" " * (level + 4) + lines[i][level:])
                else:
                    out.append(lines[i])
                i += 1
            continue
        if not fenced and stripped.startswith(">>>") and (i == 0 or not lines[i - 1].strip()):
            # A doctest paragraph outside an Examples section: a code block up to the blank line.
            prefix = line[:_indent(line)]
            out.append(prefix + "```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(prefix + "```")
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DoctestExamples(griffe.Extension):
    """Rewrites each docstring's doctests with `examples_as_code` as Griffe loads it."""

    def on_instance(self, *, node, obj, agent, **kwargs):
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = examples_as_code(obj.docstring.value)
