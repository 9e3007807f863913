"""Validates deploy/kubernetes/*.yaml offline, as no cluster runs here:

1. every document against the OpenAPI schema of each Kubernetes release
   docs/fleet.md names ("Kubernetes **1.30** to **1.37**"), in its strict
   JSON Schema form (unknown fields are errors, as `kubectl apply
   --validate=strict` makes them), with Debian's python3-jsonschema; and
   the release before the first refuses them, for the reason the docs give
   (the pod's appArmorProfile field is 1.30's). The schemas come from the
   kubernetes-validate wheel that `make test-deps` downloads into
   tests/kubernetes/schemas/ (never committed), pinned by hash
   (requirements.lock);
2. what Warden needs of them: the DaemonSet not privileged, exactly four
   capabilities, the node id from the node's name, a grace period above
   wardend's own, the secrets each pod may see, memory limits on every
   container, the namespace's Pod Security level and why `baseline` would
   refuse the DaemonSet, the configuration files the ConfigMap carries
   parse as the programs' own and name only languages the image holds
   (tests/fleet/swarm_fleet_test.py runs that pod, as shipped, until it is
   ready);
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
from urllib.parse import unquote

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARGS = None


def documented_releases():
    """The Kubernetes releases docs/fleet.md says the manifests are for:
    "Kubernetes **1.30** to **1.37**" -> v1.30.0 ... v1.37.0."""
    text = (ROOT / "docs" / "fleet.md").read_text()
    found = re.search(r"Kubernetes \*\*1\.(\d+)\*\* to \*\*1\.(\d+)\*\*", text)
    if not found:
        raise AssertionError("docs/fleet.md names no range of Kubernetes releases (\"Kubernetes **1.N** to **1.M**\")")
    return ["v1.%d.0" % minor for minor in range(int(found.group(1)), int(found.group(2)) + 1)]


# The capabilities the Pod Security Standards' baseline level lets a
# container add (kubernetes.io/docs/concepts/security/pod-security-standards,
# "Capabilities"), and its other rules that a pod of these manifests could
# meet: what `pod-security.kubernetes.io/enforce: baseline` would refuse.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def baseline_violations(pod):
    """What the baseline level refuses in a pod spec, one line each."""
    found = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(field)
    found += ["hostPath volume %s" % v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v]
    contexts = [("pod", pod.get("securityContext", {}))]
    for container in pod["containers"]:
        context = container.get("securityContext", {})
        contexts.append((container["name"], context))
        if context.get("privileged"):
            found.append("privileged container %s" % container["name"])
        added = set(context.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        if added:
            found.append("capabilities %s" % " ".join(sorted(added)))
        if any("hostPort" in p for p in container.get("ports", [])):
            found.append("hostPort in %s" % container["name"])
    for name, context in contexts:
        if context.get("appArmorProfile", {}).get("type") == "Unconfined":
            found.append("appArmorProfile Unconfined (%s)" % name)
        if context.get("seccompProfile", {}).get("type") == "Unconfined":
            found.append("seccompProfile Unconfined (%s)" % name)
    return found


class PointerResolver(jsonschema.RefResolver):
    """Kubernetes' schemas refer by JSON pointer only ("#/definitions/..."):
    resolved as such, without the $id and $anchor search jsonschema 4.10
    makes through the whole document for every reference (25 times faster
    here: a release in 0.3 s instead of 7)."""

    def resolve_fragment(self, document, fragment):
        fragment = fragment.lstrip("/")
        for part in unquote(fragment).split("/") if fragment else []:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                document = document[int(part) if isinstance(document, list) else part]
            except (LookupError, ValueError):
                raise jsonschema.RefResolutionError("unresolvable JSON pointer: %r" % fragment) from None
        return document


def load_manifests():
    docs = []
    for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


class Schemas:
    """One release's strict schemas, read from the wheel."""

    def __init__(self, wheel, version):
        self.zip = zipfile.ZipFile(wheel)
        self.base = "kubernetes_validate/kubernetes-json-schema/%s-local-strict/" % version
        try:
            definitions = json.loads(self.zip.read(self.base + "_definitions.json"))
        except KeyError:
            raise AssertionError("the kubernetes-validate wheel has no schema of Kubernetes %s, which "
                                 "docs/fleet.md names: pin a newer one (requirements.lock)" % version) from None
        self.store = {definitions["$id"]: definitions}

    def validator(self, doc):
        group, _, version = doc["apiVersion"].rpartition("/")
        name = "%s-%s%s.json" % (doc["kind"].lower(), group.split(".")[0] + "-" if group else "", version)
        schema = json.loads(self.zip.read(self.base + name))
        resolver = PointerResolver.from_schema(schema, store=dict(self.store))
        return jsonschema.Draft202012Validator(schema, resolver=resolver)

    def errors(self, doc):
        return sorted("%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
                      for e in self.validator(doc).iter_errors(doc))


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.releases = documented_releases()
        cls.schemas = Schemas(ARGS.wheel, cls.releases[-1])
        cls.docs = load_manifests()
        cls.by_kind = {}
        for name, doc in cls.docs:
            cls.by_kind.setdefault(doc["kind"], []).append(doc)

    def test_every_document_is_valid_against_every_documented_release(self):
        self.assertGreaterEqual(len(self.releases), 2, self.releases)
        kinds = set()
        for release in self.releases:
            schemas = Schemas(ARGS.wheel, release)
            for name, doc in self.docs:
                with self.subTest(release=release, file=name, kind=doc["kind"]):
                    self.assertEqual(schemas.errors(doc), [])
                    kinds.add(doc["kind"])
        self.assertLessEqual({"DaemonSet", "Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret",
                              "PersistentVolumeClaim", "Namespace"}, kinds)

    def test_the_release_before_the_first_documented_one_refuses_them_for_the_documented_reason(self):
        # docs/fleet.md: appArmorProfile needs Kubernetes 1.30.
        first = int(self.releases[0].split(".")[1])
        before = Schemas(ARGS.wheel, "v1.%d.0" % (first - 1))
        errors = [e for _, doc in self.docs for e in before.errors(doc)]
        self.assertTrue(errors, "the manifests are valid for %s too: the docs should name it" % before.base)
        self.assertTrue(all("appArmorProfile" in e for e in errors), errors)

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
        self.assertEqual(sorted(context["capabilities"]["add"]), ["KILL", "SETGID", "SETUID", "SYS_ADMIN", "SYS_PTRACE"])
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

    def test_the_namespace_admits_what_wardend_needs_and_says_which_level(self):
        namespace = self.by_kind["Namespace"][0]["metadata"]
        self.assertEqual(namespace["labels"].get("pod-security.kubernetes.io/enforce"), "privileged")
        daemonset = self.by_kind["DaemonSet"][0]["spec"]["template"]["spec"]
        # What baseline refuses, as docs/fleet.md says: the cgroup hostPath,
        # two capabilities beyond its list, and AppArmor unconfined. Nothing
        # else: privileged is never needed.
        self.assertEqual(sorted(baseline_violations(daemonset)),
                         ["appArmorProfile Unconfined (pod)", "capabilities SYS_ADMIN SYS_PTRACE",
                          "hostPath volume /sys/fs/cgroup"])
        docs = (ROOT / "docs" / "fleet.md").read_text()
        for reason in ("`baseline`", "hostPath", "SYS_ADMIN", "SYS_PTRACE", "Unconfined", "privileged"):
            self.assertIn(reason, docs)
        # The gateway alone would pass baseline.
        gateway = self.by_kind["Deployment"][0]["spec"]["template"]["spec"]
        self.assertEqual(baseline_violations(gateway), [])

    def test_every_container_has_a_memory_limit_and_its_cpu_one_or_why_not(self):
        texts = {(doc["kind"], doc["metadata"]["name"]): (ROOT / "deploy" / "kubernetes" / name).read_text()
                 for name, doc in self.docs}
        for workload in self.by_kind["DaemonSet"] + self.by_kind["Deployment"]:
            for container in workload["spec"]["template"]["spec"]["containers"]:
                with self.subTest(container=container["name"]):
                    resources = container["resources"]
                    self.assertIn("memory", resources["limits"])
                    self.assertGreaterEqual(quantity(resources["limits"]["memory"]),
                                            quantity(resources["requests"]["memory"]))
                    if "cpu" not in resources["limits"]:
                        self.assertRegex(texts[workload["kind"], workload["metadata"]["name"]], r"(?i)no cpu limit")

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
        # The pools name only languages whose interpreters the image holds
        # (tests/fleet/image_root.py's packages), and warm no module: the
        # image has no Python libraries. wardend's defaults would add a
        # JavaScript pool and numpy, and never become ready in that image.
        seeds = re.search(r"^SEEDS = \[(.*?)\]", (ROOT / "tests" / "fleet" / "image_root.py").read_text(),
                          re.S | re.M).group(1)
        interpreters = {"python": "python3.11", "bash": "bash", "javascript": "nodejs", "typescript": "nodejs",
                        "r": "r-base-core", "java": "default-jdk-headless"}
        self.assertIn("pools", wardend)
        for pool in wardend["pools"]:
            self.assertIn('"%s"' % interpreters[pool["language"]], seeds, pool)
            self.assertEqual(pool.get("warm", []), [], pool)
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


def quantity(text):
    """A memory quantity (512Mi, 8Gi) in bytes."""
    number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", text).groups()
    return int(number) << {None: 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[unit]


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
