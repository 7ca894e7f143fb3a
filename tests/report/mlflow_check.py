"""Checks the one run of an MLflow experiment against the ddptrain outputs it was logged from, through MLflow's client.

Usage: mlflow_check.py URI EXPERIMENT RUN_NAME OUT_DIR PRINT_CONFIG_FILE
The params equal the config's values (--print-config's output, a string without its quotes), each metric's history
equals metrics.jsonl's values at the same steps (train fields by name, eval fields prefixed eval_), the artifacts
hold out_dir's files byte for byte, the run is FINISHED. Prints "run RUN_ID", then "ok" or each difference (exit 1).
"""
import json
import os
import sys
import tempfile
import tomllib

from mlflow.tracking import MlflowClient

uri, experiment, run_name, out_dir, config_file = sys.argv[1:6]
client = MlflowClient(tracking_uri=uri)
problems = []
found = client.get_experiment_by_name(experiment)
runs = client.search_runs([found.experiment_id]) if found else []
if len(runs) != 1:
    sys.exit(f"{len(runs)} runs in experiment {experiment!r}, expected 1")
run = runs[0]
run_id = run.info.run_id
print("run", run_id)
if run.info.run_name != run_name:
    problems.append(f"run name {run.info.run_name!r}, expected {run_name!r}")
if run.info.status != "FINISHED":
    problems.append(f"status {run.info.status}, expected FINISHED")
if not run.data.tags.get("ddptrain.version"):
    problems.append("no ddptrain.version tag")

expected, section = {}, None
for line in open(config_file, encoding="utf-8"):
    line = line.strip()
    if line.startswith("["):
        section = line.strip("[]")
    elif "=" in line:
        key, text = (part.strip() for part in line.split("=", 1))
        value = tomllib.loads("v = " + text)["v"]
        expected[f"{section}.{key}"] = value if isinstance(value, str) else text
if len(expected) < 50:
    problems.append(f"only {len(expected)} keys read from {config_file}")
params = run.data.params
for key in sorted(set(expected) | set(params)):
    if params.get(key) != expected.get(key):
        problems.append(f"param {key}: {params.get(key)!r}, config {expected.get(key)!r}")

want = {}
for line in open(os.path.join(out_dir, "metrics.jsonl"), encoding="utf-8"):
    record = json.loads(line)
    prefix = "eval_" if record["kind"] == "eval" else ""
    for field, value in record.items():
        if field not in ("kind", "step") and type(value) in (int, float):
            want.setdefault(prefix + field, []).append((record["step"], float(value)))
got = {key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)] for key in run.data.metrics}
if "loss" not in want or "eval_accuracy" not in want:
    problems.append(f"metrics.jsonl has no loss or no eval accuracy: {sorted(want)}")
for key in sorted(set(want) | set(got)):
    if sorted(want.get(key, [])) != sorted(got.get(key, [])):
        problems.append(f"metric {key}: MLflow {sorted(got.get(key, []))}, metrics.jsonl {sorted(want.get(key, []))}")

artifacts = {a.path for a in client.list_artifacts(run_id)}
for name in ("model.pt", "model.safetensors", "metrics.jsonl", "config.json"):
    local = os.path.join(out_dir, name)
    if not os.path.exists(local):
        problems.append(f"{local} does not exist")
    elif name not in artifacts:
        problems.append(f"artifact {name} missing: {sorted(artifacts)}")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run_id, name, tmp)
            if open(path, "rb").read() != open(local, "rb").read():
                problems.append(f"artifact {name} differs from {local}")
for p in problems:
    print(p)
print("ok" if not problems else f"{len(problems)} problems")
sys.exit(1 if problems else 0)
