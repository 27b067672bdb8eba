"""The paper's published numbers (published.csv), --compare paper, --published-rows."""
