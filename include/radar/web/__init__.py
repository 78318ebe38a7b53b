"""The radar's report pages: a FastAPI app served by the Airflow api-server as a plugin (``/radar``).

``app.py`` wires routes, authentication and error pages; ``views/`` turns store rows into view models (one
module per page); ``templates/`` renders them. Importing this package touches neither the database nor the network.
"""
