"""The pairwise (A/B) kind's analysis: its judgment table (schema), the A/B tables (tables: win/lose/tie with the
per-context sign test, the ranking, agreement, position bias, control pairs) and its report blocks (blocks)."""
