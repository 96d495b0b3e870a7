"""The subset of kustomize that deploy/k8s uses, so that CI can build overlays without kubectl.

Supported: resources (files and directories), components, patches (strategic merge, or JSON 6902
with a target), images. Any other kustomization field is an error rather than silently ignored,
so a manifest that needs more of kustomize fails here instead of resolving differently.
"""

import copy
import os

import yaml

KUSTOMIZATION_FILE = "kustomization.yaml"
_SUPPORTED_FIELDS = {"apiVersion", "kind", "resources", "components", "patches", "images"}

# Strategic-merge keys of the lists deploy/k8s patches (from the Kubernetes API's
# x-kubernetes-patch-merge-key); any other list is replaced whole, as the API does for them.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
}


class KustomizeError(Exception):
    pass


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _load_kustomization(directory):
    path = os.path.join(directory, KUSTOMIZATION_FILE)
    if not os.path.isfile(path):
        raise KustomizeError(f"{directory}: no {KUSTOMIZATION_FILE}")
    docs = load_yaml_docs(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise KustomizeError(f"{path}: expected one mapping")
    k = docs[0]
    unknown = set(k) - _SUPPORTED_FIELDS
    if unknown:
        raise KustomizeError(f"{path}: fields not supported here: {sorted(unknown)}")
    return k


def _object_id(obj):
    return (obj.get("kind"), obj.get("metadata", {}).get("name"))


def strategic_merge(base, patch):
    """Returns `base` with `patch` applied as a strategic merge patch (null deletes a key)."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key in _MERGE_KEYS and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, _MERGE_KEYS[key])
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = strategic_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_list(base, patch, merge_key):
    # New items go first, as kustomize (kyaml) orders them; merged ones keep their place.
    out, added = copy.deepcopy(base), []
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise KustomizeError(f"list item without merge key {merge_key!r}: {item!r}")
        index = next((i for i, b in enumerate(out) if b.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            added.append(copy.deepcopy(item))
        else:
            out[index] = strategic_merge(out[index], item)
    return added + out


def json6902(obj, ops):
    """Applies JSON patch operations add, replace and remove (RFC 6902) to a copy of `obj`."""
    out = copy.deepcopy(obj)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if not tokens:
            raise KustomizeError(f"JSON patch on the whole object: {op}")
        parent = out
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        kind = op["op"]
        if isinstance(parent, list):
            if kind == "add":
                parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[int(last)] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[int(last)]
            else:
                raise KustomizeError(f"JSON patch op not supported: {kind}")
        else:
            if kind in ("add", "replace"):
                if kind == "replace" and last not in parent:
                    raise KustomizeError(f"JSON patch replaces a missing field: {op['path']}")
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[last]
            else:
                raise KustomizeError(f"JSON patch op not supported: {kind}")
    return out


def _apply_patch(objects, entry, directory):
    if "path" in entry:
        docs = load_yaml_docs(os.path.join(directory, entry["path"]))
        body = docs[0] if len(docs) == 1 else docs
    elif "patch" in entry:
        body = yaml.safe_load(entry["patch"])
    else:
        raise KustomizeError(f"{directory}: patch without path or patch: {entry}")
    target = entry.get("target")
    if isinstance(body, list):  # JSON 6902, as kustomize tells them apart
        if not target:
            raise KustomizeError(f"{directory}: JSON patch {entry} needs a target")
        want = (target.get("kind"), target.get("name"))
        hits = [i for i, o in enumerate(objects) if _object_id(o) == want]
        for i in hits:
            objects[i] = json6902(objects[i], body)
    else:
        want = (body.get("kind"), body.get("metadata", {}).get("name"))
        hits = [i for i, o in enumerate(objects) if _object_id(o) == want]
        for i in hits:
            objects[i] = strategic_merge(objects[i], body)
    if not hits:
        raise KustomizeError(f"{directory}: patch {entry} matches no object")


def _apply_images(objects, images):
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            name = c.get("image", "").split("@")[0].rsplit(":", 1)[0]
            for image in images:
                if image["name"] != name:
                    continue
                ref = image.get("newName", name)
                if "digest" in image:
                    ref += "@" + image["digest"]
                elif "newTag" in image:
                    ref += ":" + str(image["newTag"])
                c["image"] = ref


def _build(directory, objects, expected_kind, used):
    k = _load_kustomization(directory)
    used.append(os.path.normpath(directory))
    if k.get("kind", "Kustomization") != expected_kind:
        raise KustomizeError(f"{directory}: expected kind {expected_kind}, found {k.get('kind')}")
    for res in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, res))
        if os.path.isdir(path):
            objects.extend(_build(path, [], "Kustomization", used))
        else:
            objects.extend(load_yaml_docs(path))
    # As in kustomize: components after the resources, before this kustomization's own patches.
    for comp in k.get("components", []):
        path = os.path.normpath(os.path.join(directory, comp))
        objects = _build(path, objects, "Component", used)
    for entry in k.get("patches", []):
        _apply_patch(objects, entry, directory)
    _apply_images(objects, k.get("images", []))
    ids = [_object_id(o) for o in objects]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise KustomizeError(f"{directory}: objects defined twice: {sorted(duplicates)}")
    return objects


def resolve(directory, used=None):
    """The objects `kubectl kustomize DIRECTORY` would print, in resource order. Appends each
    kustomization and component directory it reads to `used`, if given."""
    return _build(directory, [], "Kustomization", [] if used is None else used)
