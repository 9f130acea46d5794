"""Report rendering, whatever the kind: the document model and its Markdown and HTML (document), LaTeX tables
(latex), figures (plots), table formatting (tables), annotators' comments (comments), the methods paragraph's
recruitment sentence (recruitment) and the model-assisted section (judged)."""
