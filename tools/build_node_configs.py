"""Restate the reference GPU price extract as data/node_configs.csv in the project's NodeConfig schema.

Run by hand (reads the reference folder, never at run time):

    python3 tools/build_node_configs.py [--reference ../shared/reference] [--out data/node_configs.csv]

What it does (documented in data/README.md):
* keeps the 13 catalog GPU ids only (A100 -> A100-40G, A100-80GB[-SXM] -> A100-80G, H100-SXM/H100-MEGA -> H100,
  H200-SXM -> H200); drops PCIe variants of H100/A100 (different spec), V100-32GB, A10, RTX6000, B200;
* drops rows without an on-demand price (AWS p5e);
* GCP N1 + T4/V100 rows are GPU-only in the catalog: adds an n1-standard host (4 vCPU per GPU) at the GCP
  list price per vCPU-hour, flags them `estimated` and leaves spot empty;
* flags the reference's data-quality warnings as `anomaly` (kept, not fixed), except the Azure
  ND96isr_H100_v5 GPU count (12 in the catalog, 8 per Azure docs), which is corrected openly and flagged;
* adds network bandwidth where the cloud publishes it;
* adds `hypothetical` rows for the Coral setup shapes AWS does not sell (2-GPU g-series), priced linearly per
  GPU from the cheapest real 1-GPU instance of the same GPU in that region.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

AS_OF = "2026-11-21"
TARGET_REGIONS = {
    ("aws", "us-east-1"),
    ("aws", "us-east-2"),
    ("aws", "us-west-2"),
    ("aws", "ap-northeast-2"),
    ("aws", "eu-west-1"),
    ("gcp", "us-central1"),
    ("gcp", "europe-west4"),
    ("gcp", "asia-northeast1"),
    ("azure", "eastus"),
    ("lambda", "us-east-1"),
    ("runpod", "US"),
}
GPU_MAP = {
    "H100": "H100",
    "H100-SXM": "H100",
    "H100-MEGA": "H100",
    "H200": "H200",
    "H200-SXM": "H200",
    "A100": "A100-40G",
    "A100-80GB": "A100-80G",
    "A100-80GB-SXM": "A100-80G",
    "L40S": "L40S",
    "L4": "L4",
    "A10G": "A10G",
    "T4": "T4",
    "V100": "V100",
    "A6000": "A6000",
    "RTX4090": "RTX4090",
}
# PCIe parts whose spec differs from the catalog GPU (SXM bandwidth and NVLink): not restated.
PCIE_VARIANTS = {
    ("lambda", "gpu_1x_h100_pcie"),
    ("lambda", "gpu_1x_a100"),
    ("lambda", "gpu_2x_a100"),
    ("lambda", "gpu_4x_a100"),
}
PCIE_RUNPOD_GPUS = {"H100", "A100-80GB"}  # RunPod names the SXM parts "-SXM"; the plain ones are PCIe

# Published network bandwidth (Gbit/s); AWS "up to" values are burst figures.
AWS_NETWORK = {
    "g4dn.xlarge": 25, "g4dn.2xlarge": 25, "g4dn.16xlarge": 50,
    "g5.xlarge": 10, "g5.2xlarge": 10, "g5.4xlarge": 25, "g5.8xlarge": 25, "g5.12xlarge": 40,
    "g5.16xlarge": 25, "g5.48xlarge": 100,
    "g6.xlarge": 10, "g6.2xlarge": 10, "g6.4xlarge": 25, "g6.8xlarge": 25, "g6.12xlarge": 40,
    "g6.16xlarge": 25, "g6.24xlarge": 50, "g6.48xlarge": 100,
    "g6e.xlarge": 20, "g6e.2xlarge": 20, "g6e.4xlarge": 20, "g6e.8xlarge": 25, "g6e.12xlarge": 100,
    "g6e.48xlarge": 400,
    "p3.2xlarge": 10, "p3.8xlarge": 10, "p3.16xlarge": 25,
    "p4d.24xlarge": 400, "p4de.24xlarge": 400, "p5.48xlarge": 3200, "p5en.48xlarge": 3200,
}  # fmt: skip
AWS_UP_TO = {"g4dn.xlarge", "g4dn.2xlarge", "g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g6.xlarge", "g6.2xlarge",
             "g6.4xlarge", "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "p3.2xlarge"}  # fmt: skip
GCP_NETWORK = {
    "a2-highgpu-1g": 24, "a2-highgpu-2g": 32, "a2-highgpu-4g": 50, "a2-highgpu-8g": 100,
    "a2-ultragpu-1g": 24, "a2-ultragpu-2g": 32, "a2-ultragpu-4g": 50, "a2-ultragpu-8g": 100,
    "a3-highgpu-1g": 25, "a3-highgpu-2g": 50, "a3-highgpu-4g": 100, "a3-highgpu-8g": 1000,
    "a3-megagpu-8g": 1800, "a3-ultragpu-8g": 3600,
    "g2-standard-4": 10, "g2-standard-8": 16, "g2-standard-12": 16, "g2-standard-16": 32,
    "g2-standard-24": 32, "g2-standard-32": 32, "g2-standard-48": 50, "g2-standard-96": 100,
}  # fmt: skip
AZURE_NETWORK = {
    "Standard_NC24ads_A100_v4": 20, "Standard_NC48ads_A100_v4": 40, "Standard_NC96ads_A100_v4": 80,
    "Standard_ND96amsr_A100_v4": 1600, "Standard_ND96asr_v4": 1600, "Standard_ND96isr_H100_v5": 3200,
    "Standard_NC40ads_H100_v5": 40, "Standard_NC80adis_H100_v5": 80,
    "Standard_NC4as_T4_v3": 8, "Standard_NC8as_T4_v3": 8, "Standard_NC16as_T4_v3": 8,
    "Standard_NC64as_T4_v3": 32,
}  # fmt: skip
# GCP N1 host (n1-standard-*) list price per vCPU-hour incl. its 3.75 GB/vCPU RAM; estimated from the
# GCP Compute Engine pricing page (n1-standard-1: 0.0475 us-central1, 0.0523 europe-west4, 0.0610
# asia-northeast1).
GCP_N1_PER_VCPU = {"us-central1": 0.0475, "europe-west4": 0.0523, "asia-northeast1": 0.0610}

CATALOG_SOURCE = {
    "aws": "SkyPilot catalog skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv@00148f2a",
    "gcp": "SkyPilot catalog skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv@006059e0 (VM + accelerator rows summed)",
    "azure": "SkyPilot catalog fork coopslarhette/skypilot-catalog catalogs/v8/azure/vms.csv@20291d7e",
    "lambda": "SkyPilot catalog skypilot-org/skypilot-catalog catalogs/v8/lambda/vms.csv@0f407038",
    "runpod": "SkyPilot catalog skypilot-org/skypilot-catalog catalogs/v7/runpod/vms.csv@0727c2bd",
}
NETWORK_SOURCE = {
    "aws": "AWS EC2 accelerated-computing instance specifications (network)",
    "gcp": "GCP GPU machine types documentation (network)",
    "azure": "Azure VM size documentation (network)",
}
COLUMNS = ["id", "cloud", "region", "instance_type", "gpu_id", "gpu_count", "vcpus", "memory_gib",
           "price_on_demand", "price_spot", "network_gbps", "quality", "notes", "source", "as_of"]  # fmt: skip

# Coral Sec. 6.1 core setup: L40S, L4, A10G x {1,2,4,8} in these AWS regions.
CORAL_AWS_REGIONS = ("us-east-2", "ap-northeast-2")
CORAL_AWS_GPUS = ("L40S", "L4", "A10G")
CORAL_COUNTS = (1, 2, 4, 8)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _region_name(cloud: str, region: str) -> str:
    return "us" if cloud == "runpod" else region


def restate(ref_csv: Path) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    with ref_csv.open(encoding="utf-8") as handle:
        reference = list(csv.DictReader(handle))
    for ref in reference:
        cloud, region, itype, gpu = ref["cloud"], ref["region"], ref["instance_type"], ref["gpu"]
        if (cloud, region) not in TARGET_REGIONS or gpu not in GPU_MAP:
            continue
        if (cloud, itype) in PCIE_VARIANTS or (cloud == "runpod" and gpu in PCIE_RUNPOD_GPUS):
            continue
        if not ref["price_per_hour_on_demand"]:
            continue  # spot-only (AWS p5e): no on-demand price to plan with
        count = int(ref["gpu_count"])
        on_demand = float(ref["price_per_hour_on_demand"])
        spot = float(ref["spot_price_per_hour"]) if ref["spot_price_per_hour"] else None
        vcpus = int(ref["vcpus"]) if ref["vcpus"] else None
        memory = float(ref["memory_gib"]) if ref["memory_gib"] else None
        quality = "ok"
        notes: list[str] = []
        source = CATALOG_SOURCE[cloud]
        ref_notes = ref["notes"]

        if cloud == "aws" and "spot=min" in ref_notes:
            notes.append(f"spot = minimum over AZs (max {ref['spot_price_max_per_hour']})")
        if cloud == "gcp" and ref_notes.startswith("total ="):
            notes.append(ref_notes.split(" (catalog")[0].replace("total =", "price = host"))
        if "verify" in ref_notes or "anomalous" in ref_notes:
            quality = "anomaly"
            notes.append("reference flag: " + ref_notes.split("); ", 1)[-1])
        if cloud == "gcp" and gpu == "H200":
            quality = "anomaly"
            notes.append(
                "reference flag: a3-ultragpu-8g is 86.76 in us-central1 but 49.48 in europe-west4 - verify"
            )
        if cloud == "gcp" and itype.startswith("n1-*"):
            per_vcpu = GCP_N1_PER_VCPU[region]
            vcpus = 4 * count
            memory = 15.0 * count
            host = per_vcpu * vcpus
            host_type = f"n1-standard-{vcpus}"
            notes = [
                f"catalog price is GPU-only ({on_demand}); host {host_type} added at GCP list price "
                f"{per_vcpu}/vCPU-h = {host:.4f}; spot not estimated"
            ]
            on_demand = round(on_demand + host, 5)
            spot = None
            quality = "estimated"
            itype = f"{host_type}+{count}x{'nvidia-tesla-t4' if gpu == 'T4' else 'nvidia-tesla-v100'}"
            source += "; GCP Compute Engine N1 pricing (host, estimated)"
        if cloud == "azure" and itype == "Standard_ND96isr_H100_v5":
            count = 8
            quality = "anomaly"
            notes = [n for n in notes if not n.startswith("reference flag")]
            notes.append(
                "catalog AcceleratorCount=12, the SKU is 8x H100 (Azure ND H100 v5 docs): count set to 8"
            )
        if cloud == "azure" and spot is not None and spot == on_demand:
            notes.append("catalog spot equals on-demand: treated as no spot offer")
            spot = None
        if cloud == "runpod" and spot is not None and spot > on_demand and quality != "anomaly":
            quality = "anomaly"
            notes.append("catalog spot > on-demand (columns look swapped); kept as listed - verify")
        if cloud == "runpod":
            notes.append("SECURE cloud; same price in all listed datacenters")
        if cloud == "lambda":
            notes.append("Lambda lists the same price in all regions; no spot market")
        if gpu == "H100-MEGA":
            notes.append("a3-megagpu: H100 with more GPU networking (GPUDirect-TCPXO)")

        network = {"aws": AWS_NETWORK, "gcp": GCP_NETWORK, "azure": AZURE_NETWORK}.get(cloud, {}).get(
            itype.split("+")[0]
        )
        if network is not None:
            source += "; " + NETWORK_SOURCE[cloud]
            if cloud == "aws" and itype in AWS_UP_TO:
                notes.append(f"network up to {network} Gbps (burst)")
        reg = _region_name(cloud, region)
        rows.append(
            {
                "id": f"{cloud}:{reg}:{itype}",
                "cloud": cloud,
                "region": reg,
                "instance_type": itype,
                "gpu_id": GPU_MAP[gpu],
                "gpu_count": str(count),
                "vcpus": "" if vcpus is None else str(vcpus),
                "memory_gib": _fmt(memory),
                "price_on_demand": _fmt(on_demand),
                "price_spot": _fmt(spot),
                "network_gbps": _fmt(network),
                "quality": quality,
                "notes": "; ".join(notes),
                "source": source,
                "as_of": AS_OF,
            }
        )
    return rows + hypothetical_rows(rows)


def hypothetical_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Coral shapes AWS does not sell, priced linearly from the cheapest real 1-GPU instance of the GPU."""
    extra: list[dict[str, str]] = []
    for region in CORAL_AWS_REGIONS:
        for gpu in CORAL_AWS_GPUS:
            real = [r for r in rows if r["cloud"] == "aws" and r["region"] == region and r["gpu_id"] == gpu]
            sold = {int(r["gpu_count"]) for r in real}
            singles = [r for r in real if r["gpu_count"] == "1"]
            base = min(singles, key=lambda r: float(r["price_on_demand"]))
            for count in CORAL_COUNTS:
                if count in sold:
                    continue
                od = float(base["price_on_demand"]) * count
                spot = float(base["price_spot"]) * count if base["price_spot"] else None
                itype = f"hypothetical-{count}x{gpu}"
                extra.append(
                    {
                        "id": f"aws:{region}:{itype}",
                        "cloud": "aws",
                        "region": region,
                        "instance_type": itype,
                        "gpu_id": gpu,
                        "gpu_count": str(count),
                        "vcpus": str(int(base["vcpus"]) * count),
                        "memory_gib": _fmt(float(base["memory_gib"]) * count),
                        "price_on_demand": _fmt(od),
                        "price_spot": _fmt(spot),
                        "network_gbps": base["network_gbps"],
                        "quality": "hypothetical",
                        "notes": (
                            f"AWS sells no {count}-GPU {gpu} instance; Coral Sec. 6.1 uses {count}x{gpu}. "
                            f"Priced linearly per GPU as {count} x {base['instance_type']} "
                            f"(cheapest real 1-GPU {gpu} shape in {region}); vCPUs, memory likewise."
                        ),
                        "source": f"derived from {base['id']} ({base['source'].split(';')[0]}); Coral arXiv 2605.04357 Sec. 6.1",
                        "as_of": AS_OF,
                    }
                )
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--reference", type=Path, default=root / ".." / "shared" / "reference")
    parser.add_argument("--out", type=Path, default=root / "data" / "node_configs.csv")
    args = parser.parse_args()
    rows = restate(args.reference / "prices" / "gpu_instances.csv")
    with args.out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
