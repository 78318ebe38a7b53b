"""The shadow evaluation of a candidate model (docs/evaluation.md): its run, the picks it measures, its summary, the statistics and its commands."""
