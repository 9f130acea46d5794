"""The chat kind's analysis (live conversations between a rater and a system, rated per turn and per conversation):
its four export tables (schema: the conversation ratings, the conversations, their turns and the per-turn
annotations), the tables of its report (tables: conversation means, unpaired tests, a mixed model with rater and
prompt intercepts, per-turn annotation rates, length, latency and model failures, controls) and its report (part)."""
