"""Write settings into an AIRFLOW_HOME's airflow.cfg, so that every ``airflow`` command run with that home
reads the same metadata database, executor and bundle as ``make run`` / ``make ui`` do.

Usage: ``python scripts/airflow_cfg.py [--from FILE] section.key=value ...`` (AIRFLOW_HOME from the
environment). ``--from`` takes every key of an ini file (deploy/systemd/airflow.cfg.radar, the guide's step),
each ``<NAME>`` in it filled from the environment variable NAME. Airflow writes its default airflow.cfg when
there is none (its fernet key and JWT secret with it); each key is then replaced in place (or added to its
section), Airflow's comments kept.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from pathlib import Path


def set_values(text: str, values: dict[tuple[str, str], str]) -> str:
    """``text`` (an airflow.cfg) with each (section, key) set to its value: replaced where the key is, else
    added at its section's end (the section appended when missing)."""
    lines, section, done = text.splitlines(), "", set()
    out: list[str] = []

    def close(name: str) -> None:
        added = [f"{key} = {value}" for (sec, key), value in values.items() if sec == name and (sec, key) not in done]
        at = len(out)
        while at and not out[at - 1].strip():  # before the blank lines that end the section
            at -= 1
        out[at:at] = added
        done.update((sec, key) for sec, key in values if sec == name)

    replaced = False  # the value just replaced may go on over indented lines: those go too
    for line in lines:
        if replaced and line[:1] in (" ", "\t") and line.strip():
            continue
        replaced = False
        header = re.match(r"^\[([^\]]+)\]\s*$", line)
        if header:
            close(section)
            section = header.group(1)
        else:
            found = re.match(r"^([A-Za-z0-9_]+)\s*=", line)
            if found and (section, found.group(1)) in values:
                key = found.group(1)
                line = f"{key} = {values[(section, key)]}"
                done.add((section, key))
                replaced = True
        out.append(line)
    close(section)
    for sec in dict.fromkeys(s for s, _ in values):
        if any((sec, k) not in done for s, k in values if s == sec):
            out.append(f"\n[{sec}]")
            close(sec)
    return "\n".join(out) + "\n"


def from_file(path: Path, environ: dict[str, str]) -> dict[tuple[str, str], str]:
    """Every key of the ini file at ``path``, each ``<NAME>`` in its values replaced by ``environ[NAME]``;
    SystemExit naming the variables that are not set."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(path.read_text(encoding="utf-8"))
    values = {(section, key): value for section in parser.sections() for key, value in parser[section].items()}
    missing = sorted({name for value in values.values() for name in re.findall(r"<([A-Z0-9_]+)>", value)} - set(environ))
    if missing:
        raise SystemExit(f"{path}: set {', '.join(missing)} in the environment (its <…> placeholders)")
    return {where: re.sub(r"<([A-Z0-9_]+)>", lambda m: environ[m.group(1)], value) for where, value in values.items()}


def main(argv: list[str]) -> int:
    cfg = Path(os.environ["AIRFLOW_HOME"]) / "airflow.cfg"
    values: dict[tuple[str, str], str] = {}
    if argv[:1] == ["--from"] and len(argv) > 1:
        values.update(from_file(Path(argv[1]), dict(os.environ)))
        argv = argv[2:]
    for arg in argv:
        name, _, value = arg.partition("=")
        section, _, key = name.partition(".")
        values[(section, key)] = value
    if not cfg.exists():
        from airflow.configuration import write_default_airflow_configuration_if_needed

        write_default_airflow_configuration_if_needed()
    cfg.write_text(set_values(cfg.read_text(encoding="utf-8"), values), encoding="utf-8")
    print(f"{cfg}: {len(values)} keys set ({', '.join(f'{s}.{k}' for s, k in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
