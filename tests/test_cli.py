"""The `kerasbert` command."""

import subprocess
import sys

import pytest

import kerasbert
from kerasbert.cli import main


def test_presets_table_lists_every_preset(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["preset", "family", "params"]
    for name in kerasbert.list_presets():
        assert any(line.startswith(name + " ") for line in lines), name
    assert "109.5M" in out  # bert_base_en_uncased


def test_presets_family_filter(capsys):
    main(["presets", "--family", "roberta"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["roberta_base_en", "roberta_large_en"]


def test_unknown_command_exits_with_usage():
    with pytest.raises(SystemExit) as info:
        main(["nonsense"])
    assert info.value.code == 2


def test_console_script_runs():
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.cli", "presets", "--family", "albert"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "albert_base_en_v2" in result.stdout


def test_docs_presets_table_is_current(capsys):
    import pathlib

    main(["presets", "--markdown"])
    table = capsys.readouterr().out
    docs = (pathlib.Path(__file__).parents[1] / "docs" / "presets.md").read_text()
    assert table in docs, "regenerate the table in docs/presets.md: kerasbert presets --markdown"
