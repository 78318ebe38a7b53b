"""Opportunity Radar: WeChat articles in, investment opportunities out.

Plain Python, importable without a running Airflow. The DAG in ``dags/`` only wires these modules.
"""

# The one DAG of the bundle; the report pages check Airflow's read permission on it.
DAG_ID = "opportunity_radar_slots"
