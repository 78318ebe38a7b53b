"""Not the product: stand-ins for WeRSS, DeepSeek and push endpoints (``fakes``, also hostile ones), the
offline demo day (``make run``), the local UI (``make ui``) and what the scripts that run a real Airflow on
one machine need. Tests and benchmarks use it; nothing in ``include/radar`` imports it."""
