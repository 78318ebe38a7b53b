# The two commands: `make run` (an offline demo day on embedded defaults) and `make test`. `make help` lists the rest.
SHELL := /bin/bash
.PHONY: help run test ui check mcp lint lock existing-airflow compose-day backfill-check asset-check celery bench bench-growth bench-month bench-migrate bench-rules bench-track bench-search bench-grouping bench-deadline bench-slot bench-memory bench-bomb bench-flood

help:  ## these targets: the everyday ones, the deployment paths walked on this machine, then the benchmarks
	@awk 'BEGIN {FS = ":.*## "} /^## / {printf "\n%s\n", substr($$0, 4)} /^[a-z][a-z-]*:.*## / {printf "  make %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

## Everyday

run:  ## run the five slots of a demo day through the real DAG, offline (Airflow's metadata on the embedded PostgreSQL)
	RADAR_AIRFLOW_ON_POSTGRES=1 bash scripts/bootstrap.sh python -m include.radar_demo.run

test:  ## the whole test suite, in its own AIRFLOW_HOME (RADAR_TEST_DATABASE_URL's server, else an embedded PostgreSQL)
	AIRFLOW_HOME="$$PWD/.local/airflow-test" bash scripts/bootstrap.sh python -m pytest $(PYTEST_ARGS)

ui:  ## airflow standalone (LocalExecutor, metadata on the embedded PostgreSQL) with this bundle and the report view
	RADAR_AIRFLOW_ON_POSTGRES=1 bash scripts/bootstrap.sh python -m include.radar_demo.ui

check:  ## will this deployment work? one line per check (cli check); without real connections, the demo set-up against its stand-ins
	bash scripts/bootstrap.sh python -m include.radar_demo.check $(ARGS)

mcp:  ## the read-only MCP server over the radar for an AI assistant: stdio (ARGS=--http: streamable HTTP); its tokens and a desktop client's config: docs/mcp.md
	@# stdout is the protocol's alone: the set-up's lines go to stderr, the server gets the original stdout back
	@RADAR_AIRFLOW_ON_POSTGRES=1 bash scripts/bootstrap.sh bash -c 'exec python -m include.radar.cli mcp "$$@" 1>&3 3>&-' mcp $(ARGS) 3>&1 1>&2

lint:  ## ruff alone (make test runs it too)
	bash scripts/bootstrap.sh ruff check .

lock:  ## re-resolve requirements.lock from requirements*.txt
	.venv/bin/uv pip compile --python-version 3.11 requirements.txt requirements-dev.txt -o requirements.lock

## The deployment paths, walked on this machine

existing-airflow:  ## the guide's way into an Airflow of your own, walked: a plain Airflow 3.3.2 in its own venv, the radar installed into it, one slot and a report page through its api-server (its own PostgreSQL, stopped at the end; RADAR_EXISTING_AIRFLOW_PORT pins the api-server's port)
	env -u RADAR_DATABASE_URL RADAR_PGDATA="$(CURDIR)/.local/existing-airflow/pgdata" bash scripts/bootstrap.sh python -m tools.existing_airflow $(ARGS)

compose-day:  ## docker-compose.yaml for real: images (stand-ins where no registry answers), .env as the guide says, up, a day of slots through Celery, down/up, backup; ✓/✗ per check (ARGS=--fast: engine, PostgreSQL and Redis only)
	bash scripts/bootstrap.sh python -m tools.compose_day $(ARGS)

backfill-check:  ## the README's two-day backfill under airflow standalone (LocalExecutor, PostgreSQL), checked: 10 runs in order, 2 reports, no push
	AIRFLOW_HOME="$$PWD/.local/airflow-backfill" RADAR_AIRFLOW_ON_POSTGRES=1 RADAR_AIRFLOW_DB_NAME=airflow_backfill bash scripts/bootstrap.sh python -m tools.backfill_check

asset-check:  ## the daily report as an Airflow Asset under airflow standalone, checked: a DAG scheduled on radar://daily-report runs once per pushed report, never on a rerun that pushes nothing
	AIRFLOW_HOME="$$PWD/.local/airflow-asset" RADAR_AIRFLOW_ON_POSTGRES=1 RADAR_AIRFLOW_DB_NAME=airflow_asset bash scripts/bootstrap.sh python -m tools.asset_check

celery:  ## the CeleryExecutor on this machine: Redis, scheduler, api-server and two workers run a slot of 20 articles
	AIRFLOW_HOME="$$PWD/.local/airflow-celery" RADAR_AIRFLOW_ON_POSTGRES=1 RADAR_AIRFLOW_DB_NAME=airflow_celery bash scripts/bootstrap.sh python -m tools.celery_two_workers

## Benchmarks: each prints its figures (docs/benchmarks.md)

bench:  ## seed a year of data and time the report pages (p95 < 50 ms) and search (p95 < 200 ms)
	bash scripts/bootstrap.sh python -m bench.pages

bench-growth:  ## a week of slots at 200 WeChat-like articles a day through the real steps: MB a year, where, and what retention frees
	bash scripts/bootstrap.sh python -m bench.growth $(ARGS)

bench-month:  ## a month of slots (reposts, rewrites days late, late and missing bodies, poison rows) through the real steps: pushes per piece of news, lost, stuck, calls, MB a day, slot time
	bash scripts/bootstrap.sh python -m bench.month $(ARGS)

bench-migrate:  ## a year of data on the previous release's schema, migrated to today's: the time of each migration and the total
	bash scripts/bootstrap.sh python -m bench.migrate $(ARGS)

bench-rules:  ## the reader's catastrophic /regex/ rules: Python's re before (killed after 2 s), RE2 now: save and selection times
	bash scripts/bootstrap.sh python -m bench.rules $(ARGS)

bench-track:  ## the track record's step over a year of picks (synthetic prices in akshare's shapes): cold and warm cache
	bash scripts/bootstrap.sh python -m bench.track_record $(ARGS)

bench-search:  ## which Chinese search finds more on the labelled articles: shipped (jieba + character pairs), jieba only, substring
	bash scripts/bootstrap.sh python -m bench.search

bench-grouping:  ## precision/recall of event grouping on the labelled articles, and its time for a day of 500
	bash scripts/bootstrap.sh python -m bench.grouping $(ARGS)

bench-deadline:  ## the 22:00 slot with a 10-minute LLM and a trickling WeRSS: when does the report go out?
	AIRFLOW_HOME="$$PWD/.local/airflow-bench" bash scripts/bootstrap.sh python -m bench.deadline $(ARGS)

bench-slot:  ## a slot under airflow standalone (the preloading LocalExecutor) for N articles, L s of LLM latency, C calls at once: wall vs ideal
	AIRFLOW_HOME="$$PWD/.local/airflow-bench-slot" RADAR_AIRFLOW_ON_POSTGRES=1 RADAR_AIRFLOW_DB_NAME=airflow_bench_slot bash scripts/bootstrap.sh python -m bench.slot $(ARGS)

bench-memory:  ## memory per Airflow process (scheduler, dag-processor, api-server, triggerer, tasks) under standalone, bare and with the radar, and under Celery; what the radar's imports add
	AIRFLOW_HOME="$$PWD/.local/airflow-bench-memory" bash scripts/bootstrap.sh python -m bench.memory $(ARGS)

bench-bomb:  ## what a gzip/deflate/stacked compression bomb costs the HTTP client of WeRSS and DeepSeek (peak memory)
	bash scripts/bootstrap.sh python -m bench.bomb $(ARGS)

bench-flood:  ## against a running `make ui`: 100 readers of one pushed daily link for 30 s, and Airflow's health endpoint idle and under it (p50/p95)
	source scripts/bootstrap.sh && python -m bench.flood $(ARGS)
