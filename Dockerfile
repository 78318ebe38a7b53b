# Opportunity Radar: the official Airflow image plus the radar's pinned dependencies.
#
# Built by docker-compose.yaml (`build: .`). The bundle itself (dags/, plugins/, include/) is mounted at
# /opt/airflow by docker-compose.yaml, not copied, so code changes need no rebuild; only a change of
# requirements.txt / requirements.lock does: `docker compose build`.
FROM apache/airflow:3.3.2-python3.11

# The base image already runs as the airflow user; packages are installed as that user, never as root
# (https://airflow.apache.org/docs/docker-stack/build.html).
USER airflow

# Only a build behind a TLS-inspecting proxy needs PIP_CERT (the CA bundle pip then trusts, a path inside the
# image); left empty, as on any ordinary machine, pip uses its own. `make compose-day` sets it on ours.
ARG PIP_CERT=""

COPY --chown=airflow:0 requirements.txt requirements.lock /home/airflow/radar-requirements/

# requirements.lock pins every transitive package of requirements.txt + requirements-dev.txt (the test
# tools come along, which is harmless). It pins apache-airflow==3.3.2 like the base image; naming
# "apache-airflow==${AIRFLOW_VERSION}" (set by the base image) as well makes pip refuse, instead of
# silently up- or downgrading Airflow, should the lock and the base image ever disagree.
# `pip check` then reports (without failing the build) any conflict between the lock's pins and the
# providers the base image ships that the radar does not use.
RUN if [ -z "${PIP_CERT}" ]; then unset PIP_CERT; fi \
    && pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" -r /home/airflow/radar-requirements/requirements.lock \
    && (pip check || echo "WARNING: pip check found the conflicts above between requirements.lock and the base image")

# include/ is mounted at /opt/airflow/include; Airflow only puts dags/, plugins/ and config/ on sys.path,
# so the bundle root must be on PYTHONPATH for `import include.radar` in DAGs, plugins and the CLI.
ENV PYTHONPATH=/opt/airflow
