"""The restated SkyPilot schemas (skypilot_schema.json): they reject what SkyPilot rejects, they belong to the
SkyPilot that tools/skypilot/uv.lock pins, and (`make test-skypilot`, marker ``skypilot``) they equal the installed package's."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from planning.export import skypilot_tasks
from tests.export.skypilot_schema import restated, validate_task
from tests.export.test_export import PLAN, REPOS

ROOT = Path(__file__).resolve().parents[2]

GOOD: dict[str, Any] = {
    "name": "llama-decode", "num_nodes": 1, "envs": {"HF_TOKEN": None, "MODEL": "m"},
    "resources": {"infra": "aws/us-east-1", "gpus": "L40S:1", "cloud": "AWS", "use_spot": False},
    "service": {"readiness_probe": "/v1/models", "replicas": 2},
    "setup": "pip install vllm", "run": "vllm serve m",
}
# One change each that SkyPilot refuses, and the field its message names
BAD = [
    ("num_gpus", lambda c: c.update(num_gpus=2), "num_gpus"),                              # unknown task key
    ("env name", lambda c: c["envs"].update({"1BAD": "x"}), "envs"),                       # not an env var name
    ("infra", lambda c: c["resources"].update(infra="paper/melange"), "infra"),            # no such cloud
    ("cloud enum", lambda c: c["resources"].update(cloud="nocloud"), "cloud"),             # SkyPilot's own keyword
    ("both names", lambda c: c["resources"].update(accelerators="L4:1"), "accelerators"),  # gpus alias + canonical
    ("replicas", lambda c: c["service"].update(replicas="two"), "replicas"),
    ("num_nodes", lambda c: c.update(num_nodes="2"), "num_nodes"),
]


def test_a_good_task_passes() -> None:
    validate_task(copy.deepcopy(GOOD))


@pytest.mark.parametrize(("change", "field"), [(b[1], b[2]) for b in BAD], ids=[b[0] for b in BAD])
def test_what_skypilot_refuses_is_refused(change: Any, field: str) -> None:
    config = copy.deepcopy(GOOD)
    change(config)
    with pytest.raises(AssertionError, match=field):
        validate_task(config)


def test_the_restatement_is_of_the_skypilot_the_lock_pins() -> None:
    """After SkyPilot's pin moves (tools/skypilot), this fails until `make skypilot-schema` restates it."""
    lock = tomllib.loads((ROOT / "tools" / "skypilot" / "uv.lock").read_text(encoding="utf-8"))
    locked = {p["version"] for p in lock["package"] if p["name"] == "skypilot"}
    doc = restated()
    assert locked == {doc["skypilot_version"]}, (locked, doc["skypilot_version"])
    assert set(doc["schemas"]) == {"task", "resources", "service"} and doc["skypilot_version"] in doc["source"]


@pytest.mark.skypilot
def test_the_restated_schemas_are_skypilots() -> None:
    import sky
    import sky.exceptions
    from sky import resources
    from sky.utils import common_utils

    from planning import api
    from tests.export.skypilot_schema import RESOURCE_ALIASES, live_schemas

    doc = restated()
    assert sky.__version__ == doc["skypilot_version"]
    assert live_schemas() == doc["schemas"], "SkyPilot moved: run `make skypilot-schema` and review the diff"
    assert resources.RESOURCE_CONFIG_ALIASES == RESOURCE_ALIASES
    live = doc["schemas"]

    def skypilot_accepts(config: dict[str, Any]) -> bool:  # SkyPilot's own validator on the same three parts
        try:
            res = copy.deepcopy(config.get("resources", {}))
            resources.Resources._apply_resource_config_aliases(res)
            common_utils.validate_schema(config, live["task"], "")
            common_utils.validate_schema(res, live["resources"], "")
            common_utils.validate_schema(config.get("service", {}), live["service"], "")
        except (ValueError, sky.exceptions.InvalidSkyPilotConfigError):
            return False
        return True

    assert skypilot_accepts(copy.deepcopy(GOOD))
    for name, change, _field in BAD:
        config = copy.deepcopy(GOOD)
        change(config)
        assert not skypilot_accepts(config), name
    exported = list(api.export_plan(api.solve(api.load_preset_scenario("coral-core")), "skypilot"))
    assert exported
    for f in [*skypilot_tasks(PLAN, REPOS), *exported]:  # SkyPilot itself accepts what the restatement accepts
        validate_task(yaml.safe_load(f.text))
        assert skypilot_accepts(yaml.safe_load(f.text)), f.name
