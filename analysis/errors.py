"""The errors analysis raises for what it was given, each meaning exit 2 to the command line (entry.cli.common):
an export that breaks its kind's contract, a report that cannot be written. Re-exported by analysis.kinds."""


class ExportFileError(ValueError):
    """An export file (or table) that does not follow its kind's contract: the message names the line and column.
    Every kind's reader raises a subclass of it."""


class ReportRefused(ValueError):
    """A report that cannot be written from what it was given (every answer late and late ones left out, a judge
    that failed on items, a folder holding other files): the message says why and what to do."""
