"""What annotators do and how work is handed out: study files, design, task UI, crowd runner. What differs from one
kind of study to another is the kind's part (kinds/), registered when this package is imported."""
import empeval.tasks.kinds.registered  # noqa: F401 (every kind's tasks part, registered)
