"""Benchmarks driven by a real SIP caller over loopback."""
