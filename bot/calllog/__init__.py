"""The call log: every call, turn, stage time and event, in SQL, never lost.

``CallLog`` is what the bot talks to; ``RecordWriter`` batches its records to the
database off the audio path and spools them to disk while the database is away.
See docs/calllog.md.
"""

from bot.calllog.access import DatabaseRefused
from bot.calllog.calllog import CallLog
from bot.calllog.migrate import SchemaError
from bot.calllog.privacy import mask_uri

__all__ = ["CallLog", "DatabaseRefused", "SchemaError", "mask_uri"]
