"""Test tools shared by the tests and the benchmarks: callers, caller voices, a bot process
launcher, free ports, recording and packet-capture analysis, and the benchmarks' logic that
the tests check (``bench/`` holds only the commands). Not part of the running bot.
"""
