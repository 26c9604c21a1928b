"""The composition root: settings, the CLI and the wiring of one ``switchboard`` process.

The only package that imports telephony/, serve/ and bot/ together.
"""
