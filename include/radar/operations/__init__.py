"""What keeps the radar running: the outside world from the Airflow connections, operator alerts, the database's logins, backup and restore, retention."""
