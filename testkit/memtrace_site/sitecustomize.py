"""Started with the interpreter when this folder is on ``PYTHONPATH``: the memory tracer
of ``testkit.memtrace``, if ``MEMTRACE_DIR`` names a folder."""

from testkit.memtrace import start_from_env

start_from_env()
