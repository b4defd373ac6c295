"""The `kerasbert` command (docs/cli.md).

Results go to stdout (or to an --output file, written atomically); progress
lines go to stderr. Exit status: 0 on success, 2 for bad usage or input
(argparse's own errors, and ValueError, TypeError, FileNotFoundError,
FileExistsError or NotImplementedError raised by a command, printed as one
line `kerasbert COMMAND: error: ...`; also IsADirectoryError,
NotADirectoryError and PermissionError, a path that cannot be used); 3 when
training stopped on a NaN loss or out of memory; anything else is a bug or a
failure of the machine, shown with its traceback (exit status 1).
"""

import argparse
import os
import sys

from kerasbert.cli import convert, distill, embed, evaluate, export, finetune, predict, presets, pretrain
from kerasbert.utils.hardware import prefer_onednn
from kerasbert.utils.optional import import_quietly

EXIT_CODES = """exit status:
  0  success
  2  bad usage or input: an unknown or invalid flag, a missing or unreadable file, a preset
     of the wrong kind, an output that exists without --overwrite (one line on stderr:
     "kerasbert COMMAND: error: ...")
  3  training stopped: a NaN or infinite loss, or out of memory (checkpoints kept)
  1  an unexpected failure (a Python traceback), or stdout closed before the end

Results go to stdout or --output; progress lines go to stderr. Every command: docs/cli.md."""

# One module per command: each adds its parser (`add_parser`) and runs it
# (`run`), importing what it needs when it runs.
COMMANDS = (presets, pretrain, finetune, distill, export, convert, evaluate, predict, embed)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kerasbert",
        description="The BERT family (BERT, ALBERT, RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, DeBERTa-v3, ModernBERT) on Keras 3.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kerasbert {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def version():
    """The installed distribution's version; in a source tree that is not
    installed, the package's `__version__`."""
    from importlib import metadata

    try:
        return metadata.version("kerasbert")
    except metadata.PackageNotFoundError:
        import kerasbert

        return kerasbert.__version__


def main(argv=None):
    # Before TensorFlow is imported, which reads both once: its C++ log lines
    # stay out of the output, and its oneDNN kernels are on.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    prefer_onednn()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # TEXT arguments after a flag (`embed PRESET --output v.npy TEXT`) are still texts
        if getattr(args, "texts", None) is None or any(e.startswith("-") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.texts = [*args.texts, *extra]
    if getattr(args, "jit_compile", None) is not None:
        args.jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    if getattr(args, "tensorflow", True):  # every command but `presets` may read text with it
        import_quietly("tensorflow")
    try:
        status = args.run(args)
        sys.stdout.flush()  # here, where a closed stdout is caught below, not at exit
        return status
    except (ValueError, TypeError, NotImplementedError, FileNotFoundError, FileExistsError, IsADirectoryError,
            NotADirectoryError, PermissionError) as e:
        parser.exit(2, f"kerasbert {args.command}: error: {e}\n")
    except (FloatingPointError, MemoryError) as e:  # a NaN loss or out of memory (kerasbert.tasks.training_faults)
        parser.exit(3, f"kerasbert {args.command}: training stopped: {e}\n")
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        return 1  # stdout closed early (`kerasbert predict ... | head`): nothing more to say


def _stdout_closed():
    """Whether stdout's reader has gone; then it writes to /dev/null, so
    that Python's own flush at exit raises no second error."""
    try:
        sys.stdout.flush()
        return False
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return True
