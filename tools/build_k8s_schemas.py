"""Restate the Kubernetes JSON schemas of the kinds `planning export` writes as one test file.

The export tests validate every manifest against Kubernetes' OpenAPI schemas without a cluster or a Go binary.
The schemas come from the PyPI package kubernetes-validate (Apache-2.0; JSON Schema 2020-12 generated from the
Kubernetes OpenAPI definitions, "strict": no property the API does not define). This script keeps only the
kinds the export emits and the definitions they reach, drops descriptions (they do not take part in validation)
and writes ``tests/export/schemas/kubernetes-<version>-strict.json`` with its source.

    pip download --no-deps kubernetes-validate==1.37.0 -d /tmp/kv
    python tools/build_k8s_schemas.py /tmp/kv/kubernetes_validate-1.37.0-py3-none-any.whl --version v1.34.0
"""

from __future__ import annotations

import argparse
import json
import re
import zipfile
from pathlib import Path
from typing import Any

KINDS = {"Namespace": "namespace-v1", "ConfigMap": "configmap-v1", "Service": "service-v1",
         "Deployment": "deployment-apps-v1", "StatefulSet": "statefulset-apps-v1"}
ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r"^(?:/api/_definitions\.json)?#/\$defs/(.+)$")


def _strip(node: Any, refs: set[str]) -> Any:
    """``node`` without descriptions, with every ``$ref`` pointing into this file's ``$defs`` (collected)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("description", "$id", "$schema"):
                continue
            if k == "$ref":
                m = REF.match(v)
                if m is None:
                    raise SystemExit(f"unexpected $ref {v!r}")
                refs.add(m.group(1))
                out[k] = f"#/$defs/{m.group(1)}"
            else:
                out[k] = _strip(v, refs)
        return out
    if isinstance(node, list):
        return [_strip(v, refs) for v in node]
    return node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path, help="kubernetes_validate-*.whl")
    parser.add_argument("--version", default="v1.34.0", help="Kubernetes version folder in the package")
    args = parser.parse_args(argv)
    base = f"kubernetes_validate/kubernetes-json-schema/{args.version}-local-strict/"
    with zipfile.ZipFile(args.wheel) as wheel:
        defs = json.loads(wheel.read(base + "_definitions.json"))["$defs"]
        roots = {kind: json.loads(wheel.read(base + f"{name}.json")) for kind, name in KINDS.items()}
        package = Path(args.wheel).name
    refs: set[str] = set()
    kinds = {kind: _strip(schema, refs) for kind, schema in roots.items()}
    kept: dict[str, Any] = {}
    todo = sorted(refs)
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        found: set[str] = set()
        kept[name] = _strip(defs[name], found)
        todo += sorted(found - kept.keys())
    out = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "source": f"Kubernetes {args.version} OpenAPI as JSON Schema (strict), from the PyPI package {package} "
                  f"(kubernetes-json-schema/{args.version}-local-strict; Apache-2.0), restated by "
                  "tools/build_k8s_schemas.py: only the kinds planning export writes and the definitions they "
                  "reach, descriptions dropped",
        "kinds": kinds,
        "$defs": dict(sorted(kept.items())),
    }
    target = ROOT / "tests" / "export" / "schemas" / f"kubernetes-{args.version}-strict.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {target.relative_to(ROOT)}: {len(kinds)} kinds, {len(kept)} definitions, "
          f"{target.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
