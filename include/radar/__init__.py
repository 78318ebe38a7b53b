"""Opportunity Radar: WeChat articles in, investment opportunities out.

Plain Python, importable without a running Airflow. The DAG in ``dags/`` only wires these modules.
"""
