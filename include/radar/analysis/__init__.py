"""Analyse: the DeepSeek client and its prompts, one article's analysis, its schemas, rubric and evidence checks, batches, the rate limit and the spend, and the reader's focus (rules in RE2)."""
