"""What annotators do and how work is handed out: study files, design, task UI, crowd runner."""
