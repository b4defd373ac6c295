"""`kerasbert.prefer_onednn()` before Keras turns on TensorFlow's oneDNN
kernels on x86-64, unless the user chose; `import kerasbert` alone changes
no setting and imports no framework."""

import os
import platform
import subprocess
import sys

import pytest
from helpers import tensorflow_pass_only

# TensorFlow's setting, whatever the Keras backend: checked once.
pytestmark = [pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                 reason="kerasbert switches oneDNN on x86-64 only"), tensorflow_pass_only]

# What TensorFlow itself reports after the imports: the variable, and whether
# its oneDNN kernels and graph rewrites are on.
PROBE = """
import os
import kerasbert
kerasbert.prefer_onednn()
from tensorflow.python.util import _pywrap_util_port
print(os.environ.get("TF_ENABLE_ONEDNN_OPTS"), _pywrap_util_port.IsMklEnabled())
"""


def probe(**env):
    environ = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**environ, **env}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-2:]


def test_importing_kerasbert_changes_nothing():
    import_only = ("import os, sys; before = dict(os.environ); import kerasbert; "
                   "print(dict(os.environ) == before, sorted({'keras', 'tensorflow'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", import_only], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["True", "[]"], done.stderr[-2000:]


def test_prefer_onednn_turns_it_on():
    # On a CPU without AVX512-VNNI/BF16 or AMX TensorFlow leaves it off by itself.
    assert probe() == ["1", "True"]


def test_the_users_choice_stands():
    assert probe(TF_ENABLE_ONEDNN_OPTS="0") == ["0", "False"]
