"""Validates deploy/kubernetes/*.yaml offline, as no cluster runs here:

1. every document against the OpenAPI schema of Kubernetes v1.36.0 (the
   pinned release), in its strict JSON Schema form (unknown fields are
   errors, as `kubectl apply --validate=strict` makes them), with Debian's
   python3-jsonschema. The schemas come from the kubernetes-validate wheel
   that `make test-deps` downloads into tests/kubernetes/schemas/ (never
   committed), pinned by hash (requirements.lock);
2. what Warden needs of them: the DaemonSet not privileged, exactly four
   capabilities, the node id from the node's name, a grace period above
   wardend's own, the secrets each pod may see, the configuration files
   the ConfigMap carries parse as the programs' own (`--check`-like
   validation by the programs is not run: they would probe this host);
3. that the check can fail: a manifest with a misspelt field is refused.

  /usr/bin/python3 tests/kubernetes/validate_manifests.py [--schemas DIR]
"""
import argparse
import copy
import glob
import json
import pathlib
import re
import sys
import unittest
import zipfile

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERSION = "v1.36.0"
ARGS = None


def load_manifests():
    docs = []
    for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


class Schemas:
    def __init__(self, wheel):
        self.zip = zipfile.ZipFile(wheel)
        self.base = "kubernetes_validate/kubernetes-json-schema/%s-local-strict/" % VERSION
        definitions = json.loads(self.zip.read(self.base + "_definitions.json"))
        self.store = {definitions["$id"]: definitions}

    def validator(self, doc):
        group, _, version = doc["apiVersion"].rpartition("/")
        name = "%s-%s%s.json" % (doc["kind"].lower(), group.split(".")[0] + "-" if group else "", version)
        schema = json.loads(self.zip.read(self.base + name))
        resolver = jsonschema.RefResolver.from_schema(schema, store=dict(self.store))
        return jsonschema.Draft202012Validator(schema, resolver=resolver)

    def errors(self, doc):
        return sorted("%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
                      for e in self.validator(doc).iter_errors(doc))


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.schemas = Schemas(ARGS.wheel)
        cls.docs = load_manifests()
        cls.by_kind = {}
        for name, doc in cls.docs:
            cls.by_kind.setdefault(doc["kind"], []).append(doc)

    def test_every_document_is_valid_against_the_pinned_release(self):
        kinds = set()
        for name, doc in self.docs:
            with self.subTest(file=name, kind=doc["kind"]):
                self.assertEqual(self.schemas.errors(doc), [])
                kinds.add(doc["kind"])
        self.assertLessEqual({"DaemonSet", "Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret",
                              "PersistentVolumeClaim", "Namespace"}, kinds)

    def test_a_misspelt_field_is_refused(self):
        daemonset = copy.deepcopy(self.by_kind["DaemonSet"][0])
        daemonset["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
        self.assertTrue(any("terminationGracePeriod" in e for e in self.schemas.errors(daemonset)))
        daemonset = copy.deepcopy(self.by_kind["DaemonSet"][0])
        daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = "SYS_ADMIN"
        self.assertNotEqual(self.schemas.errors(daemonset), [])

    def test_wardend_gets_what_its_sandboxes_need_and_nothing_more(self):
        pod = self.by_kind["DaemonSet"][0]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        context = container["securityContext"]
        self.assertFalse(context.get("privileged", False))
        self.assertEqual(context["capabilities"]["drop"], ["ALL"])
        self.assertEqual(sorted(context["capabilities"]["add"]), ["SETGID", "SETUID", "SYS_ADMIN", "SYS_PTRACE"])
        for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
            self.assertFalse(pod.get(forbidden, False), forbidden)
        self.assertFalse(pod["automountServiceAccountToken"])
        self.assertEqual(pod["securityContext"]["seccompProfile"],
                         {"type": "Localhost", "localhostProfile": "warden/wardend.json"})
        env = {e["name"]: e for e in container["env"]}
        self.assertEqual(env["WARDEN_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName")
        self.assertEqual(env["WARDEN_EPOCH"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.uid")
        host_paths = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v]
        self.assertEqual(host_paths, ["/sys/fs/cgroup"])
        secrets = next(v for v in pod["volumes"] if "secret" in v)["secret"]["items"]
        self.assertNotIn("gateway.key", [i["key"] for i in secrets], "only the gateway holds its key")
        self.assertNotIn("front.key", [i["key"] for i in secrets], "only the gateways hold the E2B token key")

    def test_the_configuration_matches_the_manifests(self):
        data = self.by_kind["ConfigMap"][0]["data"]
        wardend = json.loads(data["wardend.json"])
        gateway = json.loads(data["warden-gateway.json"])
        pod = self.by_kind["DaemonSet"][0]["spec"]["template"]["spec"]
        self.assertGreater(pod["terminationGracePeriodSeconds"] * 1000, wardend["shutdown_grace_ms"],
                           "the kubelet would kill wardend before it has handed its sessions over")
        self.assertEqual(wardend["fleet"]["gateway_name"], "warden-gateway")
        headless = next(s for s in self.by_kind["Service"] if s["spec"].get("clusterIP") == "None")
        self.assertEqual(gateway["nodes"]["dns"], "%s.%s.svc.cluster.local" % (headless["metadata"]["name"],
                                                                             headless["metadata"]["namespace"]))
        self.assertEqual(gateway["nodes"]["port"], headless["spec"]["ports"][0]["port"])
        self.assertEqual(wardend["listen"], ["0.0.0.0:%d" % gateway["nodes"]["port"]])
        budgets = {b["metadata"]["name"]: b["spec"] for b in self.by_kind["PodDisruptionBudget"]}
        self.assertEqual(budgets["wardend"]["maxUnavailable"], 1)
        self.assertEqual(self.by_kind["PersistentVolumeClaim"][0]["spec"]["accessModes"], ["ReadWriteMany"])
        # The files the programs read are where the pods mount them.
        for program, config, workload in (("wardend", wardend, self.by_kind["DaemonSet"][0]),
                                          ("gateway", gateway, self.by_kind["Deployment"][0])):
            spec = workload["spec"]["template"]["spec"]
            items = {i["path"] for i in next(v for v in spec["volumes"] if "secret" in v)["secret"]["items"]}
            mounted = json.dumps(config)
            for item in items:
                self.assertIn("/etc/warden/secrets/" + item, mounted, program)
            # And every secret file a configuration names is mounted.
            named = set(re.findall(r'"/etc/warden/secrets/([^"]+)"', mounted))
            self.assertLessEqual(named, items, "%s's configuration names secrets its pods lack" % program)


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemas", default=str(pathlib.Path(__file__).resolve().parent / "schemas"),
                        help="where `make test-deps` put the kubernetes-validate wheel "
                             "(default: tests/kubernetes/schemas)")
    ARGS, rest = parser.parse_known_args()
    wheels = sorted(glob.glob(str(pathlib.Path(ARGS.schemas) / "kubernetes_validate-*.whl")))
    ARGS.wheel = wheels[-1] if wheels else None
    if not ARGS.wheel:
        sys.exit("the Kubernetes schemas are missing: run `make test-deps` (it downloads them, pinned by "
                 "tests/kubernetes/requirements.lock, into BUILD/kubernetes/)")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
