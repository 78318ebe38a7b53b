"""A DAG of the reader's own, scheduled on the radar's daily report (docs/pushes.md, the Assets): it runs once
each time a day's report is pushed, and reads the day, the counts and the link from the event. `make
asset-check` puts it beside the radar's DAG under `airflow standalone`; copy it into your own dags folder."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import Asset, dag, get_current_context, task


@dag(dag_id="radar_report_consumer", schedule=Asset("radar://daily-report"), start_date=datetime(2026, 1, 1),
     catchup=False, tags=["opportunity-radar", "example"])
def radar_report_consumer():
    @task
    def read_report() -> list:
        events = get_current_context()["triggering_asset_events"][Asset("radar://daily-report")]
        reports = [dict(e.extra) for e in events]
        for report in reports:
            print(f"{report['day']}: {report['opportunities']} opportunities of {report['analysed']} analysed, "
                  f"{report['link']}")
        return reports

    read_report()


radar_report_consumer()
