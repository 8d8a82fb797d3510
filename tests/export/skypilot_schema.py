"""SkyPilot's task-YAML validation, restated: its JSON schemas in skypilot_schema.json, checked the way SkyPilot does.

`make test` validates exported task YAML with this restatement, so the dev install needs no SkyPilot (and none of
the server and cloud packages it pulls). `make test-skypilot` installs the SkyPilot that tools/skypilot/uv.lock
pins and checks that the restated schemas still equal the package's (tests/export/test_skypilot_schema.py); after
that pin moves, `make skypilot-schema` rewrites the JSON from it (`python -m tests.export.skypilot_schema --write`).
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_FILE = Path(__file__).with_name("skypilot_schema.json")
# What SkyPilot calls to validate each part of a task YAML (sky/task.py Task.from_yaml_config validates the task,
# sky/resources.py Resources.from_yaml_config its `resources`, sky/serve/service_spec.py its `service`).
PARTS = {"task": "get_task_schema", "resources": "get_resources_schema", "service": "get_service_schema"}
RESOURCE_ALIASES = {"gpus": "accelerators"}  # sky/resources.py RESOURCE_CONFIG_ALIASES, applied before validation


def restated() -> dict[str, Any]:
    """The committed restatement: ``{"skypilot_version", "source", "schemas": {part: JSON schema}}``."""
    return dict(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


def live_schemas() -> dict[str, Any]:
    """The schemas of the installed SkyPilot, as JSON values (needs the ``[skypilot]`` extra)."""
    from sky.utils import schemas

    return {part: json.loads(json.dumps(getattr(schemas, fn)())) for part, fn in PARTS.items()}


def _case_insensitive_enum(_v: Any, enums: list[str], instance: Any, _s: Any) -> Iterator[jsonschema.ValidationError]:
    if instance.lower() not in [e.lower() for e in enums]:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


def _case_sensitive_enum(_v: Any, enums: list[str], instance: Any, _s: Any) -> Iterator[jsonschema.ValidationError]:
    if instance not in enums:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


@cache
def _validator_class() -> Any:
    """sky/utils/validator.py: Draft 7 plus SkyPilot's two enum keywords (whatever `$schema` the schema names)."""
    return jsonschema.validators.extend(jsonschema.Draft7Validator, validators={
        "case_insensitive_enum": _case_insensitive_enum, "case_sensitive_enum": _case_sensitive_enum})


def _validate(obj: dict[str, Any], schema: dict[str, Any], what: str) -> None:
    """sky/utils/common_utils.py validate_schema: top-level None values are dropped (an empty YAML field)."""
    obj = {k: v for k, v in obj.items() if v is not None}
    try:
        _validator_class()(schema).validate(obj)
    except jsonschema.ValidationError as e:
        raise AssertionError(f"Invalid {what} YAML for SkyPilot {restated()['skypilot_version']}: {e.message} "
                             f"(at {'/'.join(map(str, e.absolute_path)) or 'top level'})") from e


def _with_aliases(resources: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(resources)
    for config in [out, *out.get("any_of", []), *out.get("ordered", [])]:
        for alias, canonical in RESOURCE_ALIASES.items():
            if alias in config:
                assert canonical not in config, f"resources name both {alias} and {canonical}"
                config[canonical] = config.pop(alias)
    return out


def validate_task(config: dict[str, Any]) -> None:
    """Raise AssertionError naming the field unless ``config`` (a loaded task YAML) passes SkyPilot's checks:
    the task, its ``resources`` and its ``service``."""
    schemas = restated()["schemas"]
    _validate(config, schemas["task"], "task")
    if isinstance(config.get("resources"), dict):
        _validate(_with_aliases(config["resources"]), schemas["resources"], "resources")
    if isinstance(config.get("service"), dict):
        _validate(config["service"], schemas["service"], "service")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {SCHEMA_FILE.name} from the installed SkyPilot")
    args = parser.parse_args(argv)
    import os

    import sky

    if os.environ.get("IS_SKYPILOT_SERVER") is not None:
        parser.error("unset IS_SKYPILOT_SERVER: the restatement is SkyPilot's client-side schema")
    doc = {
        "skypilot_version": sky.__version__,
        "source": f"skypilot {sky.__version__} (PyPI), sky/utils/schemas.py: "
                  + ", ".join(f"{part} = {fn}()" for part, fn in PARTS.items())
                  + "; evaluated as a client (IS_SKYPILOT_SERVER unset: keys for server-side plugins pass through), "
                  "validated with sky/utils/validator.py (Draft 7 + case_insensitive_enum, case_sensitive_enum)",
        "schemas": live_schemas(),
    }
    text = json.dumps(doc, indent=1) + "\n"
    if args.write:
        SCHEMA_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_FILE} (SkyPilot {sky.__version__})")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
