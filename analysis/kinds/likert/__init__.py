"""The Likert kind's analysis: its tidy ratings table (schema: the export's columns; load: reading an export into
the tidy table), rater quality (quality) and its report (report)."""
