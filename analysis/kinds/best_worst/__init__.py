"""The best-worst scaling kind's analysis: its choice table (schema), the tables (tables: best-minus-worst scores
with bootstrap intervals, the Bradley-Terry ranking of the comparisons the choices imply, split-half reliability,
the order shown, control tuples, a linked Likert study beside) and its report (part)."""
