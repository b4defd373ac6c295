"""`python -m kerasbert.export PRESET PATH OPTIONS CLASS FORMAT DTYPE`: the
TensorFlow subprocess of an export from JAX or torch (see `_main`)."""

import sys

from kerasbert.export import _main

_main(sys.argv)
