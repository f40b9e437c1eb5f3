"""Checks Reel's Kubernetes recipes without a cluster: every manifest in docs/ (the
.yaml files and the ```yaml blocks of the Markdown pages) validates against the
Kubernetes API schemas of `kubernetes-validate` (strict: unknown fields are errors), and
every Reel command a container runs is one docs/ingest/Dockerfile builds and copies into
the image. Prints the ingest Job's container command, args and index variable as JSON.

Usage: kubernetes.py DOCS_DIR KUBERNETES_VERSION
"""

import json
import re
import sys
from pathlib import Path

import kubernetes_validate
import yaml


def manifests(docs: Path):
    for path in sorted(docs.rglob("*")):
        if path.suffix in (".yaml", ".yml"):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    yield path, doc
        elif path.suffix == ".md":
            for block in re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S):
                for doc in yaml.safe_load_all(block):
                    if doc and "apiVersion" in doc:
                        yield path, doc


def containers(doc):
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("initContainers", []) + spec.get("containers", [])


def main():
    docs, version = Path(sys.argv[1]), sys.argv[2]
    dockerfile = (docs / "ingest" / "Dockerfile").read_text()
    built = set(re.findall(r"target/release/(reel-[a-z-]+)", dockerfile))
    checked, ingest = [], None
    for path, doc in manifests(docs):
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            sys.exit(f"{path}: {doc['kind']} {doc['metadata']['name']}: {e.message} at {list(e.path)}")
        for container in containers(doc):
            words = container.get("command", []) + container.get("args", [])
            for word in words:
                if word.startswith("reel-") and "=" not in word and word not in built:
                    sys.exit(f"{path}: {container['name']} runs {word}, which the Dockerfile does not build")
            if container.get("command") == ["reel-ingest"]:
                ingest = {"command": container["command"], "args": container["args"],
                          "completion_mode": doc["spec"].get("completionMode")}
        checked.append(f"{path.relative_to(docs)}: {doc['kind']} {doc['metadata']['name']}")
    if ingest is None:
        sys.exit("no container runs reel-ingest")
    print(json.dumps({"validated": checked, "ingest": ingest}))


if __name__ == "__main__":
    main()
