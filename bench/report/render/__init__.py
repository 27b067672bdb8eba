"""The tables: kinds, tables as data, and their text (terminal, Markdown, LaTeX), notes."""
