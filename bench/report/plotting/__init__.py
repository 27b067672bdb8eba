"""The figures (matplotlib, when drawn): reliability, CD diagrams, curves, shift plots."""
