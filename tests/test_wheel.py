"""The distribution: the sdist, and the wheel built from it, hold every module
and data file of the source tree; the wheel, installed into a new virtual
environment that holds its declared dependencies (with the `tensorflow`
extra) and nothing else, builds a model from a built-in preset, tokenizes,
classifies, saves and loads; `kerasbert --version` prints the version.

Nothing is downloaded: the new environment sees the dependencies through
links to the distributions installed here, chosen from the wheel's own
`Requires-Dist` and, transitively, from theirs.
"""

import collections
import email.parser
import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
from helpers import minilm_directory, tensorflow_pass_only
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import kerasbert
from kerasbert.cli import main

pytestmark = tensorflow_pass_only

ROOT = pathlib.Path(__file__).parents[1]
EXTRAS = ("tensorflow",)  # the extra the script needs: text in, the TensorFlow backend


def source_files():
    """{path in the wheel: path in the source tree} of every file the wheel
    must hold: the package's modules and data files, and the preset files
    (installed as `kerasbert/_preset_files`)."""
    files = {}
    for path in (ROOT / "kerasbert").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(ROOT).as_posix()] = path
    for path in (ROOT / "presets").glob("*.json"):
        files[f"kerasbert/_preset_files/{path.name}"] = path
    return files


@pytest.fixture(scope="module")
def distributions(tmp_path_factory):
    """(sdist, wheel, the build's output) built from a copy of the source tree (the build writes
    `build/` and `*.egg-info` beside the sources), the wheel from the sdist;
    no build dependency is fetched (`--no-isolation`)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for path in ROOT.iterdir():  # the top-level files (pyproject.toml, README.md, ...)
        if path.is_file():
            shutil.copy2(path, source)
    for name in ("kerasbert", "presets"):  # the directories setuptools packages
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (sdist,) = (tmp / "dist").glob("*.tar.gz")
    (wheel,) = (tmp / "dist").glob("*.whl")
    return sdist, wheel, result.stdout + result.stderr


def test_build_has_no_warning(distributions):
    *_, output = distributions
    # (setuptools says it skips byte-compiling under PYTHONDONTWRITEBYTECODE.)
    warnings = [line for line in output.splitlines()
                if "warn" in line.lower() and "byte-compiling is disabled" not in line]
    assert not warnings, "\n".join(warnings)


def wheel_metadata(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_sdist_and_wheel_hold_the_source_tree(distributions):
    sdist, wheel, _ = distributions
    expected = source_files()
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        contents = {name: archive.read(name) for name in expected if name in names}
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert sorted(set(expected) - names) == [], "missing from the wheel"
    assert sorted(n for n in names - set(expected) if ".dist-info/" not in n) == [], "in the wheel, not in the source"
    assert all(contents[name] == path.read_bytes() for name, path in expected.items())
    assert "kerasbert = kerasbert.cli:main" in entry_points

    with tarfile.open(sdist) as archive:
        root, *_ = archive.getnames()
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    in_source = {path.relative_to(ROOT).as_posix() for path in expected.values()}
    assert sorted(in_source - members) == [], "missing from the sdist"
    assert {"pyproject.toml", "README.md"} <= members

    metadata = wheel_metadata(wheel)
    assert metadata["Name"] == "kerasbert" and metadata["Version"] == kerasbert.__version__
    assert root == f"kerasbert-{kerasbert.__version__}"


def installed_distributions():
    """{name: Distribution} of the distributions this Python imports from
    (.venv's, and the system's where .venv sees them), the first of a name
    on `sys.path` as imports find it."""
    installed = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            installed.setdefault(canonicalize_name(name), distribution)
    return installed


def declared_distributions(requirements, installed):
    """{name: Distribution} of the `installed` distributions that
    `requirements` (the wheel's `Requires-Dist`, with EXTRAS) need,
    transitively, as their markers evaluate here."""
    needed, extras_of = {}, collections.defaultdict(set)
    pending = [(Requirement(r), {"", *EXTRAS}) for r in requirements]
    while pending:
        requirement, extras = pending.pop()
        if requirement.marker is not None and not any(requirement.marker.evaluate({"extra": e}) for e in extras):
            continue
        name = canonicalize_name(requirement.name)
        assert name in installed, f"{requirement} is declared but not installed"
        new_extras = set(requirement.extras) - extras_of[name]
        if name in needed and not new_extras:
            continue
        needed[name] = installed[name]
        extras_of[name] |= new_extras
        pending += [(Requirement(r), {"", *extras_of[name]}) for r in installed[name].requires or []]
    return needed


def link_distributions(needed, installed, target):
    """Links into `target` (a site-packages directory) the files of the
    `needed` distributions: a whole top-level package where only needed
    distributions of one site-packages directory own files in it, else a
    directory of links to what they own (a namespace package shared with a
    distribution that is not needed). Returns the top-level modules that
    only the other `installed` distributions own."""
    owners = collections.defaultdict(set)  # path (tuple of parts) -> the distributions with files there
    roots = {name: str(distribution.locate_file("")) for name, distribution in installed.items()}
    for name, distribution in installed.items():
        for file in distribution.files or []:
            parts = file.parts
            if parts[0] == ".." or parts[0] == "__pycache__":  # scripts; compiled top-level modules
                continue
            for depth in range(1, len(parts) + 1):
                owners[parts[:depth]].add(name)

    def link(parts):
        if owners[parts] <= needed.keys() and len({roots[name] for name in owners[parts]}) == 1:
            (root,) = {roots[name] for name in owners[parts]}
            os.symlink(os.path.join(root, *parts), os.path.join(target, *parts))
            return
        os.makedirs(os.path.join(target, *parts))
        for child in [p for p in owners if len(p) == len(parts) + 1 and p[:-1] == parts]:
            if owners[child] & needed.keys():
                link(child)

    top = [p for p in owners if len(p) == 1]
    for parts in top:
        if owners[parts] & needed.keys():
            link(parts)
    return sorted(filter(None, (module_name(p[0]) for p in top if not owners[p] & needed.keys())))


def module_name(entry):
    """The top-level module a site-packages entry is, or None (metadata,
    `.pth` files)."""
    if entry.endswith((".py", ".so", ".pyd")):
        entry = entry.split(".")[0]
    return entry if entry.isidentifier() else None


# Run by the new environment's Python: a built-in preset's encoder (no
# weights, so nothing to fetch), MiniLM's tokenizer files, a classifier on
# raw text, saved as a task preset and loaded back.
SCRIPT = """
import importlib.util, json, sys

tokenizer_dir, output, absent = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
found = [name for name in absent if importlib.util.find_spec(name) is not None]
assert not found, f"importable, though not declared: {found}"

import numpy as np
import kerasbert

assert kerasbert.__file__.startswith(sys.prefix), kerasbert.__file__
encoder = kerasbert.from_preset("bert_tiny_en_uncased", load_weights=False)
tokenizer = kerasbert.Tokenizer.from_preset(tokenizer_dir)
assert tokenizer(["Hello, world!"]).to_list() == [[7592, 1010, 2088, 999]]
preprocessor = kerasbert.preprocessing.TextPreprocessor(tokenizer, sequence_length=32)
model = kerasbert.TextClassifier(encoder, labels=["negative", "positive"], preprocessor=preprocessor)
texts = ["A gem of a film.", "Dull and far too long."]
scores = model.predict(texts, verbose=0)
assert scores.shape == (2, 2), scores.shape
model.save_to_preset(output)
loaded = kerasbert.TextClassifier.from_preset(output)
np.testing.assert_allclose(loaded.predict(texts, verbose=0), scores, atol=1e-6)
print("ok")
"""


def test_wheel_works_with_only_its_declared_dependencies(distributions, tmp_path):
    _, wheel, _ = distributions
    metadata = wheel_metadata(wheel)
    installed = installed_distributions()
    installed.pop("kerasbert")  # the one under test, from the wheel
    needed = declared_distributions(metadata.get_all("Requires-Dist"), installed)
    assert {"keras", "numpy", "tensorflow", "tensorflow-text"} <= needed.keys()
    assert not {"pytest", "transformers", "torch", "jax", "keras-hub", "kerasbert"} & needed.keys()

    environment = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
    python = str(environment / "bin" / "python")
    target = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    absent = link_distributions(needed, installed, target)
    assert {"pytest", "transformers", "torch", "jax", "keras_hub"} <= set(absent)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index",
         "--no-compile", "--disable-pip-version-check", str(wheel)],
        check=True, timeout=120,
    )

    tokenizer = tmp_path / "tokenizer"  # MiniLM's tokenizer files, without its weights or its package
    tokenizer.mkdir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(minilm_directory(), name), tokenizer)
    (tmp_path / "check.py").write_text(SCRIPT)
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    environ = {k: v for k, v in os.environ.items() if k in keep or k.startswith(("XLA_", "TF_", "OMP_", "MKL_"))}
    environ.update(KERAS_BACKEND="tensorflow", HF_HUB_OFFLINE="1", PYTHONNOUSERSITE="1",
                   KERASBERT_HOME=str(tmp_path / "home"), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [python, str(tmp_path / "check.py"), str(tokenizer), str(tmp_path / "preset"), json.dumps(absent)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environ,
    )
    assert result.returncode == 0 and result.stdout.splitlines()[-1:] == ["ok"], result.stdout + result.stderr[-5000:]

    command = environment / "bin" / "kerasbert"
    result = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env=environ)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kerasbert {metadata['Version']}\n"


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"kerasbert {kerasbert.__version__}\n"
    assert kerasbert.__version__ == importlib.metadata.version("kerasbert")
