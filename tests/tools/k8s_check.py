#!/usr/bin/env python3
"""k8s_check.py [--kubernetes-version 1.30.0] [DIR]

Holds deploy/kubernetes (or DIR) to the Kubernetes schemas, offline:

- every kustomization (the base, each overlay) is rendered the way
  kustomize does for what these use: `resources` (files and directories),
  `namespace`, and `patches` with a target (a `$patch: delete`, or JSON 6902
  operations: add, replace, remove; paths with ~1 for /);
- every plain manifest beside them (pod.yaml) is read as it is;
- each resulting object of a built-in kind is validated by
  kubernetes-validate (PyPI) against that version's schemas, strictly
  (an unknown field is an error);
- the two custom kinds (the Prometheus Operator's ServiceMonitor, Multus's
  NetworkAttachmentDefinition), whose schemas are not among Kubernetes' own,
  are held to the fields their CRDs require, and the SR-IOV resource and
  network names to agree with each other across the manifests.

Prints one line per object; exit 1 when anything fails.
"""
import argparse
import copy
import os
import sys

import yaml
import kubernetes_validate

CUSTOM = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {"spec": {"selector": dict, "endpoints": list}},
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"): {"spec": {"config": str}},
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def json_pointer(doc, path):
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]
    parent = doc
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent[p]
    return parent, parts[-1]


def apply_6902(doc, ops):
    for op in ops:
        parent, key = json_pointer(doc, op["path"])
        if isinstance(parent, list):
            i = len(parent) if key == "-" else int(key)
            if op["op"] == "remove":
                parent.pop(i)
            elif op["op"] == "replace":
                parent[i] = copy.deepcopy(op["value"])
            elif op["op"] == "add":
                parent.insert(i, copy.deepcopy(op["value"]))
            else:
                raise ValueError(f"op {op['op']} not supported")
        else:
            if op["op"] == "remove":
                del parent[key]
            elif op["op"] in ("replace", "add"):
                if op["op"] == "replace" and key not in parent:
                    raise KeyError(f"replace of a missing {op['path']}")
                parent[key] = copy.deepcopy(op["value"])
            else:
                raise ValueError(f"op {op['op']} not supported")


def build(dirpath):
    """The objects a kustomization directory renders to."""
    k = load_all(os.path.join(dirpath, "kustomization.yaml"))[0]
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(dirpath, r))
        objs += build(p) if os.path.isdir(p) else load_all(p)
    for patch in k.get("patches", []):
        t = patch["target"]
        hits = [o for o in objs if o["kind"] == t["kind"] and o["metadata"]["name"] == t["name"]]
        if not hits:
            raise ValueError(f"{dirpath}: patch target {t} matches nothing")
        body = yaml.safe_load(patch["patch"])
        for o in hits:
            if isinstance(body, dict) and body.get("$patch") == "delete":
                objs.remove(o)
            else:
                apply_6902(o, body)
    if "namespace" in k:
        for o in objs:
            if o["kind"] not in CLUSTER_SCOPED:
                o["metadata"]["namespace"] = k["namespace"]
    return objs


def check_custom(o, rules):
    bad = []
    for key, want in rules.items():
        if key not in o:
            bad.append(f"no {key}")
            continue
        for field, typ in want.items():
            if not isinstance(o[key].get(field), typ):
                bad.append(f"{key}.{field} is not a {typ.__name__}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", default=os.path.join(os.path.dirname(__file__), "../../deploy/kubernetes"))
    ap.add_argument("--kubernetes-version", default="1.30.0")
    a = ap.parse_args()
    root = os.path.normpath(a.dir)
    sets = []
    for dirpath, _, files in sorted(os.walk(root)):
        if "kustomization.yaml" in files:
            sets.append((os.path.relpath(dirpath, root), build(dirpath)))
        elif dirpath == root:
            for f in sorted(files):
                if f.endswith((".yaml", ".yml")):
                    sets.append((f, load_all(os.path.join(root, f))))
    failed = 0
    resources, networks = set(), set()
    for name, objs in sets:
        for o in objs:
            what = f"{name}: {o['kind']}/{o['metadata']['name']}"
            custom = CUSTOM.get((o.get("apiVersion"), o.get("kind")))
            if custom:
                bad = check_custom(o, custom)
                if o["kind"] == "NetworkAttachmentDefinition":
                    networks.add(o["metadata"]["name"])
                    resources.add(o["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/resourceName"))
            else:
                try:
                    kubernetes_validate.validate(o, a.kubernetes_version, strict=True)
                    bad = []
                except kubernetes_validate.ValidationError as e:
                    bad = [f"{'.'.join(map(str, e.path))}: {e.message}"]
                except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
                    bad = [f"no schema: {e}"]
            print(f"{'ok  ' if not bad else 'FAIL'} {what}" + "".join(f"\n     {b}" for b in bad))
            failed += bool(bad)
    # The pods ask for what the network attachments name.
    for name, objs in sets:
        for o in objs:
            tmpl = o.get("spec", {}).get("template", o) if o["kind"] in ("DaemonSet", "Pod") else None
            if tmpl is None:
                continue
            ann = tmpl.get("metadata", {}).get("annotations", {}).get("k8s.v1.cni.cncf.io/networks")
            for n in (ann or "").replace(" ", "").split(","):
                if n and n not in networks:
                    print(f"FAIL {name}: {o['kind']} asks for network {n}, which no manifest defines")
                    failed += 1
            for c in tmpl["spec"]["containers"]:
                for r in c.get("resources", {}).get("limits", {}):
                    if "/" in r and r not in resources:
                        print(f"FAIL {name}: {o['kind']} asks for {r}, which no network attachment names")
                        failed += 1
    print(f"{'all valid' if not failed else f'{failed} failed'} against Kubernetes {a.kubernetes_version}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
