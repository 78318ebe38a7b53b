"""Collect: the WeRSS client, one account's listing, the slot's ingest, cleaning and checking bodies, the coverage of a day and what the steps watch."""
