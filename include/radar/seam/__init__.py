"""The seam to Airflow, the only modules that import it at their top: the task runner of the steps, the callbacks, the preloading executor and the plugin."""
