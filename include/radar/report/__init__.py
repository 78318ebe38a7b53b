"""Report and follow: the daily report, the weekly summary and the track record of the picks."""
