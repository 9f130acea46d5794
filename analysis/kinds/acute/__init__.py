"""The ACUTE-Eval kind's analysis (two conversations of a chat study side by side, the listener picked per question
with a justification): its judgment table (schema: the A/B judgment table's columns and its own) and its report
(part), built from the A/B kind's tables (analysis.kinds.pairwise.tables) over pairs of conversations."""
